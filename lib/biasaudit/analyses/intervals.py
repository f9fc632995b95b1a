"""A language's drop with its 95% interval: computed once, by one rule, for every page that shows it.

Chapters 10, 16 and 22 all show each language's drop with an interval; the verdict (chapter 22) rests
on it. The interval is across models (Student t, the models as units) when the run has at least
`MIN_MODELS` of them; with fewer, a t interval over two or three models is too wide to decide
anything, and the interval is a percentile bootstrap over base items of each item's drop averaged
over the models (it speaks for these models only). A bootstrap end has a Monte Carlo error of its
own: it is estimated from the replicates in batches and returned with the interval, so that the
verdict can say where an end is too close to a floor for the draws to decide.
"""

from __future__ import annotations

import numpy as np

from biasaudit.analyses import stats
from biasaudit.core.options import StudyOptions

MIN_MODELS: int = 5
ACROSS_MODELS, OVER_ITEMS = "across models", "over items"
# Replicates are split into this many batches to estimate the Monte Carlo error of an interval's ends.
ERROR_BATCHES = 20


def interval_basis(n_models: int, min_models: int = MIN_MODELS) -> str:
    """Across models when there are enough of them to be the units of an interval; else over items."""
    return ACROSS_MODELS if n_models >= min_models else OVER_ITEMS


def bootstrap_with_error(values: np.ndarray, *, n_boot: int, seed, level: float) -> tuple[float, float, float, float, float]:
    """(mean, low, high, low_se, high_se): `stats.bootstrap_mean_ci`'s interval (the same draws for the same
    seed) and the Monte Carlo standard error of each end, from the spread of the ends over
    `ERROR_BATCHES` batches of the replicates (divided by √batches: the error of the ends of all of them)."""
    values = np.asarray(values, dtype=float).ravel()
    values = values[~np.isnan(values)]
    nan = float("nan")
    if values.size == 0:
        return nan, nan, nan, nan, nan
    rng = np.random.default_rng(seed)
    replicates = np.concatenate([values.take(idx).mean(axis=1)
                                 for idx in stats._bootstrap_index_chunks(rng, values.size, n_boot)])
    low, high = stats._percentile_interval(replicates, level)
    batches = [b for b in np.array_split(replicates, ERROR_BATCHES) if b.size >= 20]
    if len(batches) < 2:
        return float(values.mean()), low, high, nan, nan
    ends = np.array([stats._percentile_interval(b, level) for b in batches])
    errors = ends.std(axis=0, ddof=1) / np.sqrt(len(batches))
    return float(values.mean()), low, high, float(errors[0]), float(errors[1])


def language_interval(model_drops: np.ndarray, item_drops: np.ndarray, options: StudyOptions, *, key: tuple,
                      min_models: int = MIN_MODELS) -> tuple[str, float, float, float, float, float]:
    """(basis, drop, low, high, low_se, high_se): a t interval over the models' drops (no Monte Carlo error:
    the errors are 0), or, with fewer than `min_models` models, a percentile bootstrap over the items' drops
    (each averaged over the models) with the Monte Carlo error of its ends."""
    basis = interval_basis(int(np.sum(~np.isnan(np.asarray(model_drops, dtype=float)))), min_models)
    if basis == ACROSS_MODELS:
        drop, low, high = stats.t_interval(model_drops, level=options.level)
        return basis, drop, low, high, 0.0, 0.0
    drop, low, high, low_se, high_se = bootstrap_with_error(
        item_drops, n_boot=options.n_bootstrap, level=options.level,
        seed=[options.seed, stats.group_seed_key(("verdict", *key))])
    return basis, drop, low, high, low_se, high_se
