"""biasaudit: audit language models for stereotype bias across languages.

Modules: `items` (the items table), `models` and `scoring` (log-probabilities of continuations),
`stats` (permutation tests, FDR, bootstrap), `analyses` (one function per table of the book),
`charts` (altair, rendered to SVG), `pipeline` and `run_book` (runs of the book).
"""

__version__ = "0.1.0"
