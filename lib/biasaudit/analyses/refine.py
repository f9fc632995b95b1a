"""Cells whose verdict would rest on the Monte Carlo draws are tested again with many more.

A sign-flip p from B random sign vectors has a standard error of about sqrt(p(1 − p) / B). Where a
cell's Benjamini–Hochberg q lies within a few of those of alpha, another seed could call it reliable
or not: such a cell is tested again with `REFINE_FACTOR` times the draws, so that the book's verdicts
do not depend on the seed. (On the paper's released scores this settles, for instance, whether a cell
whose q sits at 0.05 with 20,000 draws is reliable.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasaudit.analyses import stats

# Cells near the BH threshold are tested again with this many times the draws (20,000 -> 1,000,000).
REFINE_FACTOR = 50


def refine_near_threshold(
    table: pd.DataFrame,
    tests: pd.DataFrame,
    *,
    by: list[str],
    value: str,
    n_permutations: int,
    seed: int,
    alpha: float,
    factor: int = REFINE_FACTOR,
) -> pd.DataFrame:
    """`sign_flip_tests` output with the cells whose BH q lies within Monte Carlo error of `alpha` tested
    again with `factor` × `n_permutations` draws, so that a cell's verdict does not rest on the draws.

    A cell is near when |q − alpha| ≤ 3 × its q's Monte Carlo standard error, taken as p's
    (sqrt(p(1 − p) / B)) times m / rank (BH's step-up factor); the q-values are worked out again after
    each pass, so a cell that a refined neighbour moves is looked at too (three passes at most). The
    refined draws come from their own seeded stream per cell. Column `flips` says how many sign vectors
    each cell's p rests on (0: enumerated exactly).
    """
    out = tests.copy()
    out["flips"] = np.where(out["n"] <= 16, 0, n_permutations)
    if len(out) == 0:
        return out
    grouped = dict(list(table.groupby(by, sort=True, dropna=False, observed=True)[value]))
    for _ in range(3):
        p = out["p"].to_numpy(dtype=float)
        q = stats.benjamini_hochberg(p)
        m = np.isfinite(p).sum()
        rank = pd.Series(p).rank(method="first").to_numpy()
        se = np.sqrt(np.clip(p * (1 - p), 1.0 / out["flips"].clip(lower=1), None) / out["flips"].clip(lower=1))
        near = (np.abs(q - alpha) <= 3 * se * m / rank) & (out["flips"].to_numpy() == n_permutations)
        if not near.any():
            break
        for index in np.flatnonzero(near):
            key = tuple(out.iloc[index][c] for c in by)
            series = grouped[key if len(key) > 1 else key[0]]
            d = series.to_numpy(dtype=float, na_value=np.nan)
            rng = np.random.default_rng([seed, stats.group_seed_key(tuple(stats._plain(v) for v in key)), 1])
            out.iloc[index, out.columns.get_loc("p")] = stats.sign_flip_pvalue(
                d[~np.isnan(d)], n_permutations=n_permutations * factor, rng=rng)
            out.iloc[index, out.columns.get_loc("flips")] = n_permutations * factor
    return out
