"""Tests of biasaudit.analyses.stats against scipy/statsmodels references, hand-worked cases and
seeded simulations (calibration and power)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from biasaudit.analyses.stats import (
    add_bh,
    benjamini_hochberg,
    bootstrap_mean_ci,
    carry_over,
    cluster_bootstrap,
    group_seed_key,
    noise_only,
    sign_flip_pvalue,
    sign_flip_tests,
    t_interval,
)
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests


def _mean_stat(x: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(x, axis=axis)


def _scipy_exact_sign_flip(d: np.ndarray) -> float:
    # One sample with permutation_type="samples": scipy's null flips the sign of each observation.
    res = sps.permutation_test(
        (d,), _mean_stat, permutation_type="samples", n_resamples=np.inf, vectorized=True,
        alternative="two-sided",
    )
    return float(res.pvalue)


# --------------------------------------------------------------------------------------------
# sign_flip_pvalue
# --------------------------------------------------------------------------------------------


def test_hand_worked_cases() -> None:
    rng = np.random.default_rng(0)
    # Only all-plus and all-minus reach |mean| 2 among the 8 sign vectors.
    assert sign_flip_pvalue(np.array([1.0, 2.0, 3.0]), rng=rng) == 0.25
    # Every sign vector of [1, -1] has |mean| 0 or 1 >= 0: the observed mean 0 is never extreme.
    assert sign_flip_pvalue(np.array([1.0, -1.0]), rng=rng) == 1.0
    # One difference: both signs give the same |mean|.
    assert sign_flip_pvalue(np.array([0.3]), rng=rng) == 1.0
    # [1, 1, 1, 1] reaches |mean| 1 only with all-plus or all-minus: 2/16.
    assert sign_flip_pvalue(np.ones(4), rng=rng) == 2 / 16
    # [2, 1, 1] (sum 4): with +2 the rest adds -2, 0, 0 or 2, and only +2 reaches 4; mirrored: 2/8.
    assert sign_flip_pvalue(np.array([2.0, 1.0, 1.0]), rng=rng) == 2 / 8
    # [3, 1, 1, -1] (sum 4): with +3 the rest adds -3, -1 (3 ways), 1 (3 ways) or 3; 3 + 1 and
    # 3 + 3 reach 4 in 4 ways, and -3 plus anything never reaches -4; mirrored: 8/16.
    assert sign_flip_pvalue(np.array([3.0, 1.0, 1.0, -1.0]), rng=rng) == 8 / 16


def test_edge_cases() -> None:
    rng = np.random.default_rng(0)
    assert np.isnan(sign_flip_pvalue(np.array([]), rng=rng))
    assert sign_flip_pvalue(np.zeros(5), rng=rng) == 1.0
    assert sign_flip_pvalue(np.zeros(500), rng=rng) == 1.0  # Monte Carlo path
    with pytest.raises(ValueError, match="NaN"):
        sign_flip_pvalue(np.array([1.0, np.nan]), rng=rng)
    with pytest.raises(ValueError, match="one-dimensional"):
        sign_flip_pvalue(np.ones((2, 2)), rng=rng)
    with pytest.raises(ValueError, match="exact_below"):
        sign_flip_pvalue(np.ones(3), rng=rng, exact_below=40)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 11, 14])  # scipy needs n >= 2; n = 1 is hand-worked
def test_exact_matches_scipy_permutation_test(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    for shift in (0.0, 0.4, 1.0):
        d = rng.normal(shift, 1.0, size=n)
        assert sign_flip_pvalue(d, rng=rng) == pytest.approx(_scipy_exact_sign_flip(d), abs=1e-12)


def test_exact_matches_scipy_with_ties_and_paired_form() -> None:
    rng = np.random.default_rng(7)
    for n in (4, 6, 9, 12):
        d = rng.integers(-3, 4, size=n).astype(float)  # many exact ties among the sums
        ours = sign_flip_pvalue(d, rng=rng)
        assert ours == pytest.approx(_scipy_exact_sign_flip(d), abs=1e-12)
        # The same test written as two paired samples (scipy swaps within each pair).
        x = rng.normal(size=n)
        y = x - d
        paired = sps.permutation_test(
            (x, y), lambda a, b, axis: np.mean(a - b, axis=axis), permutation_type="samples",
            n_resamples=np.inf, vectorized=True,
        )
        assert ours == pytest.approx(paired.pvalue, abs=1e-9)


def _rational_sign_flip(d: np.ndarray) -> float:
    """Exact p in rational arithmetic: decimal inputs are read as the decimals they print as."""
    values = [Fraction(repr(float(x))) for x in d]
    observed = abs(sum(values))
    hits = sum(
        abs(sum(s * v for s, v in zip(signs, values))) >= observed
        for signs in itertools.product((1, -1), repeat=len(values))
    )
    return hits / 2 ** len(values)


def test_ties_broken_by_rounding_still_count() -> None:
    # Values on a 0.1 grid: many sign vectors tie with the observed |mean| in exact arithmetic,
    # while in floating point 0.1 + 0.2 != 0.3, so ties are off by ~1e-16.
    rng = np.random.default_rng(23)
    for _ in range(40):
        n = int(rng.integers(3, 10))
        d = np.round(rng.integers(-6, 7, size=n) * 0.1, 1)
        assert sign_flip_pvalue(d, rng=rng) == _rational_sign_flip(d)
    # A tie that rounding breaks: flipping {0.1, 0.2, -0.3} keeps the sum 0.5 mathematically.
    d = np.array([0.1, 0.2, -0.3, 0.5])
    assert sign_flip_pvalue(d, rng=rng) == _rational_sign_flip(d) == 10 / 16


@pytest.mark.parametrize("n", [14, 15, 16])
def test_monte_carlo_agrees_with_exact(n: int) -> None:
    rng = np.random.default_rng(40 + n)
    d = rng.normal(0.35, 1.0, size=n)
    exact = sign_flip_pvalue(d, rng=rng, exact_below=16)
    b = 100_000
    mc = sign_flip_pvalue(d, rng=np.random.default_rng(1), n_permutations=b, exact_below=0)
    se = np.sqrt(exact * (1 - exact) / b)
    assert abs(mc - exact) < 4 * se + 1 / b
    assert 0.0 < mc <= 1.0


def test_monte_carlo_floor_and_determinism() -> None:
    d = np.full(200, 1.0) + np.random.default_rng(3).normal(0, 0.01, 200)
    p = sign_flip_pvalue(d, rng=np.random.default_rng(5), n_permutations=999)
    assert p == 1 / 1000  # nothing reaches an all-positive sample: (1 + 0) / (1 + 999)
    d = np.random.default_rng(4).normal(0.05, 1, 300)
    a = sign_flip_pvalue(d, rng=np.random.default_rng(9), n_permutations=2_000)
    b = sign_flip_pvalue(d, rng=np.random.default_rng(9), n_permutations=2_000)
    assert a == b


def test_monte_carlo_agrees_with_scipy_on_large_n() -> None:
    d = np.random.default_rng(11).normal(0.12, 1.0, size=120)
    b = 20_000
    ours = sign_flip_pvalue(d, rng=np.random.default_rng(2), n_permutations=b)
    ref = sps.permutation_test((d,), _mean_stat, permutation_type="samples", n_resamples=b,
                               vectorized=True, rng=3).pvalue
    # scipy's two-sided MC p is 2 * min(p_less, p_greater): SE 2 * sqrt(p/2 (1 - p/2) / B).
    se = np.sqrt(4 * (ref / 2) * (1 - ref / 2) / b + ours * (1 - ours) / b)
    assert abs(ours - ref) < 4 * se


# --------------------------------------------------------------------------------------------
# sign_flip_tests
# --------------------------------------------------------------------------------------------


def _cells(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for model, language, n in [("m1", "de", 40), ("m1", "hi", 10), ("m2", "de", 25), ("m2", "sw", 60)]:
        shift = 0.3 if language == "hi" else 0.0
        for i, v in enumerate(rng.normal(shift, 1.0, size=n)):
            rows.append({"model": model, "language": language, "base_id": f"b{i}", "diff": v})
    return pd.DataFrame(rows)


def test_sign_flip_tests_shape_and_values() -> None:
    table = _cells()
    out = sign_flip_tests(table, by=["model", "language"], value="diff", n_permutations=2_000, seed=1)
    assert list(out.columns) == ["model", "language", "n", "mean", "p"]
    assert list(zip(out["model"], out["language"])) == [("m1", "de"), ("m1", "hi"), ("m2", "de"), ("m2", "sw")]
    assert out["n"].tolist() == [40, 10, 25, 60]
    for row in out.itertuples():
        d = table.loc[(table["model"] == row.model) & (table["language"] == row.language), "diff"].to_numpy()
        assert row.mean == pytest.approx(d.mean())
        rng = np.random.default_rng([1, group_seed_key((row.model, row.language))])
        assert row.p == sign_flip_pvalue(d, n_permutations=2_000, rng=rng)
    # The n = 10 cell is below exact_below: exact, so it matches scipy whatever the seed.
    hi = table.loc[table["language"] == "hi", "diff"].to_numpy()
    assert out.loc[out["language"] == "hi", "p"].item() == pytest.approx(_scipy_exact_sign_flip(hi))


def test_sign_flip_tests_is_reproducible_and_order_free() -> None:
    table = _cells()
    kw = dict(by=["model", "language"], value="diff", n_permutations=1_000, seed=20261129)
    first = sign_flip_tests(table, **kw)
    again = sign_flip_tests(table, **kw)
    pd.testing.assert_frame_equal(first, again)
    # Neither the order of the groups nor the order of rows within a group matters.
    shuffled = table.sample(frac=1.0, random_state=4).reset_index(drop=True)
    pd.testing.assert_frame_equal(first, sign_flip_tests(shuffled, **kw))
    reversed_groups = table.sort_values(["model", "language"], ascending=False)
    pd.testing.assert_frame_equal(first, sign_flip_tests(reversed_groups, **kw))
    # A cell's p does not depend on which other cells are in the table.
    alone = sign_flip_tests(table[table["language"] == "sw"], **kw)
    assert alone["p"].item() == first.loc[first["language"] == "sw", "p"].item()
    other_seed = sign_flip_tests(table, **{**kw, "seed": 1})
    assert not np.allclose(other_seed["p"], first["p"])


def test_sign_flip_tests_drops_nan_and_keeps_empty_groups() -> None:
    table = pd.DataFrame({"cell": ["a"] * 5 + ["b"] * 2, "diff": [1.0, 2.0, np.nan, 3.0, np.nan, np.nan, np.nan]})
    out = sign_flip_tests(table, by=["cell"], value="diff", seed=0)
    a, b = out.iloc[0], out.iloc[1]
    assert (a["n"], a["mean"], a["p"]) == (3, 2.0, 0.25)
    assert b["n"] == 0 and np.isnan(b["mean"]) and np.isnan(b["p"])
    with pytest.raises(KeyError, match="nope"):
        sign_flip_tests(table, by=["nope"], value="diff", seed=0)


def test_group_key_ignores_numpy_scalar_types() -> None:
    assert group_seed_key((np.int64(3), np.str_("de"))) == group_seed_key((3, "de"))


# --------------------------------------------------------------------------------------------
# Benjamini–Hochberg
# --------------------------------------------------------------------------------------------


def test_bh_hand_worked() -> None:
    # m = 3: p * m / rank = 0.06, 0.0315, 0.5; the step-up minimum from the top gives 0.0315 twice.
    assert benjamini_hochberg([0.02, 0.021, 0.5]) == pytest.approx([0.0315, 0.0315, 0.5])
    # Unsorted input keeps its order: sorted 0.005, 0.01, 0.03, 0.04 -> 0.02, 0.02, 0.04, 0.04.
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_bh_matches_statsmodels() -> None:
    rng = np.random.default_rng(8)
    for m in (1, 2, 7, 70, 500):
        p = np.concatenate([rng.uniform(size=m - m // 4), rng.uniform(0, 0.01, size=m // 4)])
        reject, q_ref, _, _ = multipletests(p, alpha=0.05, method="fdr_bh")
        q = benjamini_hochberg(p)
        np.testing.assert_allclose(q, q_ref, rtol=1e-12)
        np.testing.assert_array_equal(q <= 0.05, reject)


def test_bh_nan_left_out_of_family() -> None:
    p = np.array([0.01, np.nan, 0.04, 0.03, np.nan, 0.005])
    q = benjamini_hochberg(p)
    assert np.isnan(q[[1, 4]]).all()
    np.testing.assert_allclose(q[[0, 2, 3, 5]], benjamini_hochberg([0.01, 0.04, 0.03, 0.005]))
    assert benjamini_hochberg([]).shape == (0,)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        benjamini_hochberg([0.5, 1.5])


def test_add_bh() -> None:
    table = pd.DataFrame({"cell": list("abcde"), "p": [0.001, 0.02, 0.04, np.nan, 0.9]})
    out = add_bh(table)
    assert "q" not in table.columns  # a copy, not an in-place change
    np.testing.assert_allclose(out["q"].to_numpy(), benjamini_hochberg(table["p"]), equal_nan=True)
    assert out["reliable"].tolist() == [True, True, False, False, False]
    assert out["reliable"].dtype == bool
    custom = add_bh(table, q_col="q_bh", reliable_col="sig", alpha=0.01)
    assert custom["sig"].tolist() == [True, False, False, False, False]


# --------------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------------


def test_cluster_bootstrap_moves_clusters_together() -> None:
    # Cluster k has k + 1 rows, all with value 10 * k: a resample is valid only if every drawn
    # cluster arrives whole, with its own value on every row.
    sizes = {f"c{k}": k + 1 for k in range(5)}
    table = pd.DataFrame(
        [{"base_id": c, "value": 10.0 * k} for k, (c, size) in enumerate(sizes.items()) for _ in range(size)]
    ).sample(frac=1.0, random_state=1)  # rows of a cluster need not be adjacent
    seen: list[pd.DataFrame] = []

    def row_mean(sample: pd.DataFrame) -> float:
        seen.append(sample)
        return float(sample["value"].mean())

    est, low, high = cluster_bootstrap(table, cluster="base_id", statistic=row_mean, n_boot=300, seed=3)
    assert est == pytest.approx(table["value"].mean())
    assert low <= est <= high
    resamples = seen[1:]  # the first call is the estimate on the table itself
    assert len(resamples) == 300
    for sample in resamples:
        assert sorted(sample["base_id"].unique()) == list(range(5))  # draws relabelled 0..4
        for _, rows in sample.groupby("base_id"):
            assert rows["value"].nunique() == 1
            k = int(rows["value"].iloc[0] // 10)
            assert len(rows) == k + 1
    # Some replicate must have repeated a cluster (else this would not test resampling).
    assert any(sample.groupby("base_id")["value"].first().nunique() < 5 for sample in resamples)


def test_cluster_bootstrap_is_deterministic_and_matches_fast_path() -> None:
    rng = np.random.default_rng(12)
    items = pd.DataFrame({"base_id": [f"b{i}" for i in range(50)], "drop": rng.normal(0.1, 0.2, 50)})
    # Two rows per item (e.g. two pivots) whose average is the item's value.
    table = pd.concat([items.assign(drop=items["drop"] + 0.05), items.assign(drop=items["drop"] - 0.05)])

    def mean_of_item_means(sample: pd.DataFrame) -> float:
        return float(sample.groupby("base_id")["drop"].mean().mean())

    a = cluster_bootstrap(table, cluster="base_id", statistic=mean_of_item_means, n_boot=400, seed=5)
    b = cluster_bootstrap(table, cluster="base_id", statistic=mean_of_item_means, n_boot=400, seed=5)
    assert a == b
    # pd.factorize numbers clusters by first appearance, the same order as `items`.
    fast = bootstrap_mean_ci(items["drop"].to_numpy(), n_boot=400, seed=5)
    np.testing.assert_allclose(a, fast, rtol=1e-10)
    other = bootstrap_mean_ci(items["drop"].to_numpy(), n_boot=400, seed=6)
    assert other[1:] != fast[1:]


def test_bootstrap_close_to_scipy_percentile() -> None:
    x = np.random.default_rng(21).normal(0.5, 1.0, size=100)
    ref = sps.bootstrap((x,), np.mean, method="percentile", n_resamples=20_000, rng=1, vectorized=True)
    est, low, high = bootstrap_mean_ci(x, n_boot=20_000, seed=2)
    assert est == pytest.approx(x.mean())
    # The MC error of a 2.5% quantile with 20,000 draws is about 0.003 here (SE of the mean 0.1).
    assert low == pytest.approx(ref.confidence_interval.low, abs=0.012)
    assert high == pytest.approx(ref.confidence_interval.high, abs=0.012)
    assert low < est < high
    table = pd.DataFrame({"item": np.arange(100), "v": x})
    gen = cluster_bootstrap(table, cluster="item", statistic=lambda t: float(t["v"].mean()), n_boot=2_000, seed=3)
    assert gen[1] == pytest.approx(ref.confidence_interval.low, abs=0.03)
    assert gen[2] == pytest.approx(ref.confidence_interval.high, abs=0.03)


def test_bootstrap_edge_cases() -> None:
    assert all(np.isnan(bootstrap_mean_ci(np.array([np.nan]), seed=0)))
    assert bootstrap_mean_ci(np.array([2.0, 2.0, 2.0]), n_boot=50, seed=0) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean_ci(np.ones(3), seed=0, level=95)
    table = pd.DataFrame({"base_id": ["a", None], "v": [1.0, 2.0]})
    with pytest.raises(ValueError, match="base_id"):
        cluster_bootstrap(table, cluster="base_id", statistic=lambda t: 0.0, seed=0)


# --------------------------------------------------------------------------------------------
# t interval, noise only, carry-over
# --------------------------------------------------------------------------------------------


def test_t_interval_matches_scipy() -> None:
    x = np.random.default_rng(2).normal(0.2, 0.5, size=10)
    for level in (0.9, 0.95, 0.99):
        mean, low, high = t_interval(x, level=level)
        ref = sps.t.interval(level, df=9, loc=x.mean(), scale=sps.sem(x))
        assert mean == pytest.approx(x.mean())
        assert (low, high) == pytest.approx(ref)
    mean, low, high = t_interval([0.3])
    assert mean == 0.3 and np.isnan(low) and np.isnan(high)
    assert t_interval([1.0, np.nan, 3.0])[0] == 2.0
    assert t_interval([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)


def test_noise_only_matches_simulation() -> None:
    rng = np.random.default_rng(31)
    n = 50
    d = rng.normal(0.0, 0.15, size=n)
    s = d.std(ddof=1)
    # Pure noise with the observed spread: the mean |mean| of many such samples.
    draws = rng.normal(0.0, s, size=(200_000, n)).mean(axis=1)
    assert noise_only(d) == pytest.approx(np.abs(draws).mean(), rel=0.01)
    assert noise_only(d) == pytest.approx(s * np.sqrt(2 / np.pi) / np.sqrt(n))
    assert np.isnan(noise_only([1.0]))


def test_carry_over() -> None:
    rng = np.random.default_rng(17)
    before = rng.uniform(0.2, 0.8, size=200)
    after = 0.5 + 0.4 * (before - 0.5) + rng.normal(0, 0.05, size=200)
    result = carry_over(before, after)
    slope, intercept = np.polyfit(before, after, 1)
    assert result["slope"] == pytest.approx(slope)
    assert result["r"] == pytest.approx(np.corrcoef(before, after)[0, 1])
    assert result["sd_ratio"] == pytest.approx(after.std(ddof=1) / before.std(ddof=1))
    assert result["slope"] == pytest.approx(result["r"] * result["sd_ratio"])
    assert result["n"] == 200
    assert carry_over(before, before)["slope"] == pytest.approx(1.0)
    with_nan = carry_over(np.append(before, np.nan), np.append(after, 0.3))
    assert with_nan["slope"] == pytest.approx(slope) and with_nan["n"] == 200
    assert np.isnan(carry_over([0.5, 0.5], [0.1, 0.9])["slope"])
    with pytest.raises(ValueError, match="pair up"):
        carry_over([1.0, 2.0], [1.0])


# --------------------------------------------------------------------------------------------
# Calibration and power of the whole procedure (sign-flip test, then BH over the family)
# --------------------------------------------------------------------------------------------


def _simulated_family(delta: float, n_runs: int, seed: int, n_cells: int = 40, n_items: int = 60) -> pd.DataFrame:
    """Per-item changes for n_runs families of n_cells cells: symmetric noise (SD 0.15) minus delta."""
    rng = np.random.default_rng(seed)
    values = rng.normal(0.0, 0.15, size=(n_runs, n_cells, n_items)) - delta
    run, cell, _ = np.meshgrid(np.arange(n_runs), np.arange(n_cells), np.arange(n_items), indexing="ij")
    return pd.DataFrame({"run": run.ravel(), "cell": cell.ravel(), "diff": values.ravel()})


def _detections(table: pd.DataFrame, seed: int) -> pd.DataFrame:
    tests = sign_flip_tests(table, by=["run", "cell"], value="diff", n_permutations=1_000, seed=seed)
    tests["q"] = tests.groupby("run")["p"].transform(lambda p: benjamini_hochberg(p.to_numpy()))
    tests["reliable"] = tests["q"] < 0.05
    return tests


def test_calibration_false_alarms_under_the_null() -> None:
    n_runs, n_cells = 100, 40
    tests = _detections(_simulated_family(0.0, n_runs, seed=2026), seed=1)
    tested = n_runs * n_cells
    # Raw p-values are valid: P(p <= 0.05) <= 0.05 up to Monte Carlo error (SE ~ 0.0034).
    raw_rate = float((tests["p"] <= 0.05).mean())
    assert raw_rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / tested)
    assert raw_rate > 0.03  # and not wildly conservative
    # After BH the per-cell false alarm rate is at most alpha (in fact far below it) ...
    per_cell = float(tests["reliable"].mean())
    assert per_cell <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / tested)
    # ... and under the complete null BH controls the chance of any false alarm in a run at alpha.
    any_rate = float(tests.groupby("run")["reliable"].any().mean())
    assert any_rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / n_runs)


def test_power_rises_with_injected_shift() -> None:
    power = {}
    for k, delta in enumerate((0.0, 0.05, 0.1)):
        tests = _detections(_simulated_family(delta, 25, seed=500 + k), seed=k)
        power[delta] = float(tests["reliable"].mean())
    assert power[0.0] < 0.05
    # delta = 0.05 is 2.6 standard errors (0.15 / sqrt 60): most cells are caught; 0.1 all of them.
    assert power[0.0] < power[0.05] < power[0.1]
    assert power[0.05] > 0.5
    assert power[0.1] > 0.99


def test_cells_near_the_threshold_are_tested_again_with_more_draws():
    from biasaudit.analyses import stats
    from biasaudit.analyses.refine import refine_near_threshold

    # three cells of 20 items: one clearly shifted (all positive), one null (symmetric), one whose exact p
    # (0.0287, by enumeration below) puts its BH q at 0.043: near the threshold with 200 draws
    near = [0.8, -0.54, 1.25, 1.44, -1.45, -0.8, 0.63, 0.18, 0.48, -0.35, 1.38, 1.28, 0.57, 1.63, 0.97, -0.36, 0.87,
            -0.46, 1.38, 0.45]
    cells = {"clear": [1.0 + 0.1 * k for k in range(20)], "null": [x for k in range(1, 11) for x in (0.1 * k, -0.1 * k)],
             "near": near}
    table = pd.DataFrame([{"model": "m", "language": cell, "change": x} for cell, d in cells.items() for x in d])
    first = stats.sign_flip_tests(table, by=["model", "language"], value="change", n_permutations=200, seed=3,
                                  exact_below=0)
    refined = refine_near_threshold(table, first, by=["model", "language"], value="change", n_permutations=200,
                                    seed=3, alpha=0.05, factor=50).set_index("language")
    q_first = stats.benjamini_hochberg(first["p"].to_numpy())
    near = first.assign(q=q_first).set_index("language")
    assert abs(near.loc["near", "q"] - 0.05) < 0.05, "the case is built with one cell near the threshold"
    assert refined.loc["near", "flips"] == 10_000 and refined.loc["null", "flips"] == 200
    assert refined.loc["null", "p"] == near.loc["null", "p"], "a cell far from the threshold keeps its p"
    # the refined p is the seeded 10,000-draw p of that cell, and close to the exact one (2**20 sign vectors)
    d = table.loc[table["language"] == "near", "change"].to_numpy()
    again = stats.sign_flip_pvalue(d, n_permutations=10_000, exact_below=0,
                                   rng=np.random.default_rng([3, stats.group_seed_key(("m", "near")), 1]))
    assert refined.loc["near", "p"] == again
    signs = 1 - 2 * ((np.arange(2 ** 20)[:, None] >> np.arange(20)) & 1)
    exact = float(np.mean(np.abs(signs @ np.sort(d)) >= abs(d.sum()) - 1e-9))
    assert abs(refined.loc["near", "p"] - exact) < 4 * np.sqrt(exact * (1 - exact) / 10_000)
