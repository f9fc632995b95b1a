"""Time `sign_flip_tests` on a study-sized table against scipy.stats.permutation_test per cell.

The table has 10 models x 7 languages = 70 cells of about 360 per-item differences each, and
both sides draw 10,000 sign vectors per cell. scipy is slow, so it runs on a subset of cells
and its time is scaled to all 70; both sides see the same data. The two sets of p-values are
also compared, as a check that the timings measure the same test.

Run: PYTHONPATH=lib .venv/bin/python benchmarks/bench_stats.py [--scipy-cells 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from biasaudit.analyses.stats import sign_flip_tests
from biasaudit.core.options import DEFAULT_SEED
from scipy import stats as sps


def study_table(seed: int, n_models: int = 10, n_languages: int = 7, n_items: int = 360) -> pd.DataFrame:
    """Per-item differences shaped like the study's model x language cells (n varies 340-380)."""
    rng = np.random.default_rng(seed)
    frames = []
    for m in range(n_models):
        for lang in range(n_languages):
            n = n_items + int(rng.integers(-20, 21))
            shift = rng.choice([0.0, 0.0, 0.02, 0.05])
            frames.append(pd.DataFrame({
                "model": f"model-{m:02d}",
                "language": f"l{lang}",
                "diff": rng.normal(shift, 0.15, size=n),
            }))
    return pd.concat(frames, ignore_index=True)


def _mean(x: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(x, axis=axis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--scipy-cells", type=int, default=7, help="cells scipy runs on (time scaled to all)")
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats for sign_flip_tests")
    args = parser.parse_args()

    table = study_table(seed=DEFAULT_SEED)
    cells = table.groupby(["model", "language"], sort=True)["diff"]
    n_cells = cells.ngroups
    sizes = cells.size()

    sign_flip_tests(table.head(400), by=["model", "language"], value="diff", n_permutations=100, seed=0)  # warm-up
    ours_times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        ours = sign_flip_tests(table, by=["model", "language"], value="diff", n_permutations=args.permutations, seed=1)
        ours_times.append(time.perf_counter() - start)
    ours_s = min(ours_times)

    subset = list(cells)[: args.scipy_cells]
    scipy_p = []
    start = time.perf_counter()
    for i, (_, series) in enumerate(subset):
        res = sps.permutation_test(
            (series.to_numpy(),), _mean, permutation_type="samples", n_resamples=args.permutations,
            vectorized=True, rng=i,
        )
        scipy_p.append(res.pvalue)
    scipy_subset_s = time.perf_counter() - start
    scipy_s = scipy_subset_s * n_cells / len(subset)

    # Same test? scipy's two-sided Monte Carlo p is 2 * min(p_less, p_greater), each with its own
    # +1, so its floor is 2 / (B + 1) and its standard error is 2 * sqrt(p/2 (1 - p/2) / B); ours
    # counts |mean| directly (SE sqrt(p (1 - p) / B)). The draws are independent, so the
    # variances add.
    b = args.permutations
    p_ours = ours["p"].to_numpy()[: len(subset)]
    p_ref = np.asarray(scipy_p)
    half = np.clip(p_ref / 2, 1 / b, 0.5)
    p_mid = np.clip(p_ours, 1 / b, 1 - 1 / b)
    se = np.sqrt(4 * half * (1 - half) / b + p_mid * (1 - p_mid) / b)
    z = np.abs(p_ours - p_ref) / se

    print(f"table: {n_cells} cells, n per cell {sizes.min()}-{sizes.max()} (median {int(sizes.median())}), "
          f"{args.permutations:,} sign vectors per cell")
    print(f"sign_flip_tests, all {n_cells} cells (best of {args.repeats}): {ours_s:8.2f} s "
          f"({1000 * ours_s / n_cells:.1f} ms per cell)")
    print(f"scipy.stats.permutation_test, {len(subset)} cells: {scipy_subset_s:8.2f} s "
          f"({1000 * scipy_subset_s / len(subset):.1f} ms per cell); scaled to {n_cells} cells: {scipy_s:.2f} s")
    print(f"speed-up (scipy / sign_flip_tests): {scipy_s / ours_s:.1f}x")
    print(f"p-value agreement on the {len(subset)} shared cells: max |z| = {z.max():.2f} "
          f"(independent draws; below ~3 means the same test)")


if __name__ == "__main__":
    main()
