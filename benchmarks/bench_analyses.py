"""Time every chapter's analysis functions on a study-sized synthetic scores table.

The table has 10 models, each scoring 362 English base items, their versions in 7 languages and
3 English rewordings (3,982 item versions per model, about 40,000 rows), shaped like the paper's
release. Every function runs with the study's settings: 10,000 sign-flip draws per cell, 5,000
bootstrap resamples, 100 detection runs per injected shift. The target is all chapters in under
a minute on a laptop-class CPU.

For scale, scipy.stats.permutation_test runs the same per-cell test (10,000 resamples) on a few
of the 70 model × language cells, and its time is scaled to all of them.

Run: PYTHONPATH=lib .venv/bin/python benchmarks/bench_analyses.py [--scipy-cells 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from biasaudit import analyses
from biasaudit.core.options import DEFAULT_SEED, StudyOptions
from scipy import stats as sps
from scipy.special import logit

LANGUAGES = ["ar", "es", "fr", "hi", "ko", "sw", "zh"]
ROUTES = ["de", "fi", "ja"]


def study_scores(seed: int, n_models: int = 10, n_items: int = 362) -> pd.DataFrame:
    """A scores table shaped like the study: per model, English originals, translations and
    rewordings, with translated scores that keep part of each item's preference and drop a little."""
    rng = np.random.default_rng(seed)
    frames = []
    bases = np.array([f"b{i:04d}" for i in range(n_items)])
    for m in range(n_models):
        english = np.clip(rng.normal(0.53, 0.13, n_items), 0.01, 0.99)
        versions = [("en", "original", "human", english)]
        for language in LANGUAGES:
            kept = 0.5 + 0.35 * (english - 0.5) - rng.choice([0.0, 0.01, 0.02]) + rng.normal(0, 0.15, n_items)
            versions.append((language, "translation", "released", np.clip(kept, 0.01, 0.99)))
        for route in ROUTES:
            kept = 0.5 + 0.7 * (english - 0.5) + rng.normal(0, 0.12, n_items)
            versions.append(("en", "rewording", route, np.clip(kept, 0.01, 0.99)))
        for language, variant, via, soft in versions:
            suffix = language if variant != "rewording" else f"en~{via}"
            contrast = logit(soft)
            frames.append(pd.DataFrame({
                "model": f"model-{m:02d}", "item_id": [f"{b}/{suffix}" for b in bases], "base_id": bases,
                "source": "written", "dimension": "gender", "category": "trait", "language": language,
                "variant": variant, "via": via, "third_kind": "unrelated",
                "lp_mean_stereotyped": contrast - 2.0, "lp_mean_anti_stereotyped": -2.0,
                "lp_mean_third": np.minimum(contrast, 0.0) - 3.0,
            }))
    return pd.concat(frames, ignore_index=True)


def _mean(x: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(x, axis=axis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--bootstrap", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=100, help="detection runs per injected shift")
    parser.add_argument("--scipy-cells", type=int, default=3, help="cells scipy runs on (time scaled to all)")
    args = parser.parse_args()

    scores = study_scores(seed=DEFAULT_SEED)
    per_model = scores.groupby("model").size().iloc[0]
    print(f"table: {scores['model'].nunique()} models x {per_model:,} item versions = {len(scores):,} rows; "
          f"{args.permutations:,} permutations, {args.bootstrap:,} bootstraps, {args.runs} detection runs")
    options = StudyOptions(n_permutations=args.permutations, n_bootstrap=args.bootstrap, seed=1)
    calls = {
        "cell_tests (10_language_drops)": lambda: analyses.cell_tests(scores, options),
        "language_drops (10_language_drops)": lambda: analyses.language_drops(scores, options),
        "noise_floor (11_noise_floor)": lambda: analyses.noise_floor(scores, options),
        "floor_cells (11_noise_floor)": lambda: analyses.floor_cells(scores, options),
        "model_gaps (12_models)": lambda: analyses.model_gaps(scores, options),
        "carry_over_table (13_carry_over)": lambda: analyses.carry_over_table(scores, options),
        "detection_power (19_detection)": lambda: analyses.detection_power(scores, options, n_runs=args.runs),
    }
    timings = {}
    results = {}
    for name, call in calls.items():
        start = time.perf_counter()
        results[name] = call()
        timings[name] = time.perf_counter() - start
        print(f"  {name:<40s} {timings[name]:7.2f} s")
    total = sum(timings.values())
    print(f"  {'all chapters':<40s} {total:7.2f} s  (target: under 60 s)")

    cells = results["cell_tests (10_language_drops)"]
    pairs = analyses.paired_with_english(analyses.item_scores(scores))
    grouped = list(pairs.groupby(["model", "language"], sort=True)["change"])
    start = time.perf_counter()
    for i, (_, series) in enumerate(grouped[: args.scipy_cells]):
        sps.permutation_test((series.to_numpy(),), _mean, permutation_type="samples",
                             n_resamples=args.permutations, vectorized=True, rng=i)
    scipy_subset = time.perf_counter() - start
    scipy_all = scipy_subset / args.scipy_cells * len(grouped)
    # cell_tests runs two tests per cell (soft and binary scores); compare one test with one test.
    ours_per_test = timings["cell_tests (10_language_drops)"] / (2 * len(cells))
    scipy_per_test = scipy_subset / args.scipy_cells
    print(f"per-cell test: ours {1000 * ours_per_test:.1f} ms, scipy.stats.permutation_test "
          f"{1000 * scipy_per_test:.1f} ms (ratio scipy/ours {scipy_per_test / ours_per_test:.1f}x); "
          f"scipy for the {len(grouped)} soft-score cells alone: {scipy_all:.1f} s")


if __name__ == "__main__":
    main()
