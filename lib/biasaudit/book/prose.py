"""Phrases the chapters build their sentences from, each right for every count: nothing, one value,
ties, several.

A chapter's sentence about its run is a function of the run's tables, tested on those edge cases,
so that a page never reads "from 0% in Arabic to 0% in Arabic", "100% or more" or "P from 1 to 1".
"""

from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from biasaudit.core.words import counted
from biasaudit.data.languages import language_label
from biasaudit.run.beside import THIS_RUN


def spoken_list(parts: Sequence[object], conjunction: str = "and") -> str:
    """"a", "a and b", "a, b and c"; "" for nothing."""
    parts = [str(p) for p in parts]
    if not parts:
        return ""
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + f" {conjunction} " + parts[-1]


def spoken_clauses(parts: list[str]) -> str:
    """`spoken_list`, with semicolons between parts that hold commas themselves."""
    if len(parts) < 2 or not any("," in part for part in parts):
        return spoken_list(parts)
    return "; ".join(parts[:-1]) + "; and " + parts[-1]


def count_noun(n: int, singular: str, plural: str | None = None) -> str:
    """"1 template", "2 templates", "0 templates" (`core.words.counted`)."""
    return counted(n, singular, plural)


def collapsed_counts(collapsed: pd.DataFrame) -> str:
    """What a run set aside as collapsed contrasts, by kind: "37 translated versions and 20 English
    rewordings", "1 translated version", "no version"."""
    if collapsed.empty:
        return "no version"
    translated = int((collapsed["variant"] == "translation").sum())
    english = int(((collapsed["variant"] == "rewording") & (collapsed["language"] == "en")).sum())
    other = len(collapsed) - translated - english
    parts = [count_noun(translated, "translated version") if translated else "",
             count_noun(english, "English rewording") if english else "",
             count_noun(other, "rewording in another language", "rewordings in other languages") if other else ""]
    return spoken_list([p for p in parts if p])


def refined_text(cells: pd.DataFrame, n_permutations: int, alpha: float) -> str:
    """Which cells were tested again because their q lay within Monte Carlo error of `alpha`
    (`analyses.refine`), and what that settled; "" where none was."""
    again = cells.loc[cells.get("flips", pd.Series(dtype=float)) > n_permutations]
    if again.empty:
        return (f"No cell's q lay within Monte Carlo error of {alpha:g}, so every verdict above rests on "
                f"{n_permutations:,} sign flips and would not change with another seed.")
    flips = int(again["flips"].max())
    group = "language" if "language" in again else "via"
    named = spoken_list([f"{row['model']} × {row[group]} (q {row['q']:.4f}, "
                         f"{'reliable' if row['reliable'] else 'not reliable'})" for _, row in again.iterrows()])
    return (f"{count_noun(len(again), 'cell')} had a q within Monte Carlo error of {alpha:g} with "
            f"{n_permutations:,} sign flips, so {'it was' if len(again) == 1 else 'they were'} tested again with "
            f"{flips:,}: {named}. The verdicts above therefore do not change with another seed.")


def language_names(codes: Sequence[str], conjunction: str = "and") -> str:
    """Language names, spoken: "Spanish (es) and Catalan (ca)"."""
    return spoken_list([language_label(code) for code in codes], conjunction)


def value_range(low: float, high: float, digits: int) -> str:
    """"from 0.40 to 0.60", or one value where both read the same at `digits` decimals."""
    shown_low, shown_high = f"{low:.{digits}f}", f"{high:.{digits}f}"
    return shown_high if shown_low == shown_high else f"from {shown_low} to {shown_high}"


def magnitude(value: float) -> str:
    """An absolute difference at three decimals; "less than 0.001" where those would read 0.000."""
    value = abs(value)
    return "less than 0.001" if 0 < value < 0.0005 else f"{value:.3f}"


def extremes(values: pd.Series, show: Callable[[float], str], *, name: Callable[[str], str] = language_label,
             every: str = "every language") -> str:
    """The lowest and highest of `values` (indexed by, e.g., language), named: "from 11% in Korean
    (ko) to 98% in Spanish (es)"; where all read the same as shown, "98% in every language"; with
    one value, "98% in Spanish (es)"; "" for none. Ties at an end name every holder of that end."""
    values = values.dropna()
    if values.empty:
        return ""
    shown = values.map(show)
    if len(values) == 1:
        return f"{shown.iloc[0]} in {name(str(values.index[0]))}"
    low, high = values.min(), values.max()
    if show(low) == show(high):
        return f"{show(high)} in {every}"

    def holders(end: float) -> str:
        return spoken_list([name(str(key)) for key in values.index[shown == show(end)]])

    return f"from {show(low)} in {holders(low)} to {show(high)} in {holders(high)}"


def reasons_sentence(reasons: Sequence[str], noun: str, shown: int = 3) -> str:
    """What went wrong, counted: "The one failure: X." or "The 5 failures: X (3) and Y (2)." (at most
    `shown` reasons named, by count then name, the rest counted together); "" for none."""
    counts = pd.Series([str(r) for r in reasons], dtype=object).value_counts()
    if counts.empty:
        return ""
    total = int(counts.sum())
    if total == 1:
        return f"The one {noun}: {counts.index[0]}."
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    parts = [f"{reason} ({n})" for reason, n in ordered[:shown]]
    rest = ordered[shown:]
    if rest:
        parts.append(f"{count_noun(len(rest), 'other reason')} ({sum(n for _, n in rest)})")
    return f"The {total} {noun}s: {spoken_list(parts)}."


def run_scope(*, released: bool, models: Sequence[str], offline: Sequence[str]) -> str:
    """Whose numbers a results page shows, for its Summary: the paper's released scores analysed
    here, the small offline models on the project's bank, or the run's own models."""
    own = [model for model in models if model.endswith(THIS_RUN)]
    if released and own:
        paper = [model for model in models if model not in own]
        return (f"The numbers above are this build's own analyses of the item scores the paper released "
                f"({count_noun(len(paper), 'model')}: {spoken_list(paper)}) and of {spoken_list(own)}, scored here on "
                "the paper's items; none is a figure copied from the paper.")
    if released:
        return (f"The numbers above are this build's own analyses of the item scores the paper released "
                f"({count_noun(len(models), 'model')}: {spoken_list(models)}), not figures copied from the paper.")
    if models and all(model in offline for model in models):
        return (f"The numbers above are this run's: small offline models ({spoken_list(models)}) on the run's items. "
                "They are not the paper's numbers, and with such models and few items they say more about the method "
                "than about any deployed model.")
    return (f"The numbers above are this run's: {spoken_list(models)} on the run's items. They are not the paper's "
            "numbers.")
