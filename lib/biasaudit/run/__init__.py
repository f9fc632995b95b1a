"""A run: its params, its pipeline steps and their tables, the engines and executors that score it, and the
study (the analyses' results, cached). Stands on `core` (paths, stores, options), `data`, `lm` and `analyses`."""
