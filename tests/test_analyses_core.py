"""The core analyses (noise floor, model gaps, carry-over, detection power) and the vectorized
statistics behind them, on small hand-built scores tables with answers from scipy, statsmodels,
pingouin, the slow reference paths of biasaudit.analyses.stats, or worked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin
import pytest
import statsmodels.formula.api as smf
from biasaudit import analyses
from biasaudit.analyses import stats
from biasaudit.core.options import StudyOptions
from conftest import score_row
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

# --------------------------------------------------------------------------------------------
# Building scores tables
# --------------------------------------------------------------------------------------------


def _record(model: str, base: str, language: str, variant: str, via: str, soft: float,
            texts: tuple[str, str, str, str] | None = None) -> dict:
    return score_row(model, base, language, soft, variant=variant, via=via, texts=texts, category="trait")


def study(seed: int = 3, n_items: int = 12, models=("m1", "m2"), shifts=None, floor_sd: float = 0.04,
          translation_sd: float = 0.08) -> pd.DataFrame:
    """Two models, English originals, translations (es, sw), English rewordings (human-1, human-2),
    and Spanish rewordings of the Spanish translations (within-language)."""
    rng = np.random.default_rng(seed)
    shifts = shifts or {"es": 0.0, "sw": 0.08}
    records = []
    for m, model in enumerate(models):
        english = rng.uniform(0.3, 0.85, size=n_items)
        for i, soft in enumerate(english):
            base = f"b{i:02d}"
            records.append(_record(model, base, "en", "original", "human", soft))
            for language, shift in shifts.items():
                translated = float(np.clip(0.5 + 0.5 * (soft - 0.5) - shift + rng.normal(0, translation_sd), 0.02, 0.98))
                records.append(_record(model, base, language, "translation", "human", translated))
                if language == "es":
                    records.append(_record(model, base, "es", "rewording", "human-1",
                                           float(np.clip(translated + rng.normal(0, floor_sd), 0.02, 0.98))))
            for route in ("human-1", "human-2"):
                texts = None
                if route == "human-1" and i % 3 == 0:  # the context came back unchanged
                    texts = (f"{base} context", f"{base} s2", f"{base} a2", f"{base} t2")
                elif route == "human-1":
                    texts = (f"{base} c2", f"{base} s2", f"{base} a2", f"{base} t2")
                records.append(_record(model, base, "en", "rewording", route,
                                       float(np.clip(soft + rng.normal(0, floor_sd), 0.02, 0.98)), texts))
    return pd.DataFrame(records)


def _scipy_exact(d: np.ndarray) -> float:
    return float(sps.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                      n_resamples=np.inf, vectorized=True).pvalue)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return study()


@pytest.fixture(scope="module")
def scored(table) -> pd.DataFrame:
    return analyses.item_scores(table)


def _changes(scored: pd.DataFrame, model: str, variant: str, key: str, value: str) -> pd.Series:
    """soft(version) − soft(English original) by base item, for one model and route/language."""
    english = scored[(scored.model == model) & (scored.variant == "original")].set_index("base_id")["soft"]
    rows = scored[(scored.model == model) & (scored.variant == variant) & (scored[key] == value)
                  & (scored.language == ("en" if variant == "rewording" else value))]
    other = rows.set_index("base_id")["soft"]
    return other - english.loc[other.index]


# --------------------------------------------------------------------------------------------
# Vectorized statistics
# --------------------------------------------------------------------------------------------


def test_shifted_pvalues_match_scipy_exact_for_every_column_and_shift():
    rng = np.random.default_rng(5)
    d = rng.normal(0.1, 0.3, size=(11, 4))
    shifts = [0.0, 0.05, -0.2, 0.4]
    p = stats.sign_flip_pvalues_shifted(d, shifts, rng=rng)
    assert p.shape == (4, 4)
    for r in range(4):
        for g, shift in enumerate(shifts):
            assert p[r, g] == pytest.approx(_scipy_exact(d[:, r] - shift), abs=1e-12)


def test_shifted_pvalues_monte_carlo_is_the_sign_flip_test():
    d = np.sort(np.random.default_rng(8).normal(0.03, 0.2, size=150))
    p = stats.sign_flip_pvalues_shifted(d, [0.0, 0.03], n_permutations=4_000, rng=np.random.default_rng(2))
    assert p[0, 0] == stats.sign_flip_pvalue(d, n_permutations=4_000, rng=np.random.default_rng(2))
    assert p[0, 1] == stats.sign_flip_pvalue(d - 0.03, n_permutations=4_000, rng=np.random.default_rng(2))
    # Against scipy's Monte Carlo test (independent draws): within Monte Carlo error.
    ref = sps.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                               n_resamples=20_000, vectorized=True, rng=1).pvalue
    assert abs(p[0, 0] - ref) < 4 * np.sqrt(2 * ref * (1 - ref) / 4_000) + 0.002
    assert stats.sign_flip_pvalues_shifted(np.zeros(30), [0.0], rng=np.random.default_rng(0))[0, 0] == 1.0
    with pytest.raises(ValueError, match="finite"):
        stats.sign_flip_pvalues_shifted(np.array([1.0, np.nan]), [0.0], rng=np.random.default_rng(0))


def test_bootstrap_sums_replicates_the_slow_cluster_bootstrap():
    rng = np.random.default_rng(4)
    table = pd.DataFrame({"base_id": np.repeat([f"c{i}" for i in range(30)], 3), "v": rng.normal(size=90),
                          "w": rng.uniform(size=90)})
    codes, _ = pd.factorize(table["base_id"])
    sums = np.column_stack([np.bincount(codes, weights=table["v"]), np.bincount(codes, weights=table["w"]),
                            np.bincount(codes).astype(float)])

    def fast(totals):  # ratio of two means and their difference
        return np.column_stack([totals[:, 0] / totals[:, 1], (totals[:, 0] - totals[:, 1]) / totals[:, 2]])

    def slow(sample):
        return float(sample["v"].sum() / sample["w"].sum())

    estimate, low, high = stats.bootstrap_sums(sums, fast, n_boot=300, seed=11)
    reference = stats.cluster_bootstrap(table, cluster="base_id", statistic=slow, n_boot=300, seed=11)
    np.testing.assert_allclose([estimate[0], low[0], high[0]], reference, rtol=1e-10)
    mean_of_one = stats.bootstrap_sums(np.column_stack([np.ones(30), sums[:, 0] / 3]),
                                       lambda t: t[:, 1] / t[:, 0], n_boot=500, seed=2)
    np.testing.assert_allclose(mean_of_one, stats.bootstrap_mean_ci(sums[:, 0] / 3, n_boot=500, seed=2), rtol=1e-10)


def test_carry_over_from_sums_matches_carry_over():
    rng = np.random.default_rng(9)
    x = rng.uniform(0.2, 0.8, 80)
    y = 0.5 + 0.3 * (x - 0.5) + rng.normal(0, 0.05, 80)
    totals = stats.carry_over_sums(x, y, np.arange(80), 80).sum(axis=0)
    slope, r, sd_ratio = stats.carry_over_from_sums(totals)[0]
    reference = stats.carry_over(x, y)
    assert (slope, r, sd_ratio) == pytest.approx((reference["slope"], reference["r"], reference["sd_ratio"]))
    assert r == pytest.approx(pingouin.corr(x, y)["r"].iloc[0])
    flat = stats.carry_over_from_sums(stats.carry_over_sums(x, np.full(80, 0.4), np.arange(80), 80).sum(axis=0))[0]
    assert flat[0] == 0.0 and np.isnan(flat[1])
    assert np.isnan(stats.carry_over_from_sums(np.array([1.0, 0, 0, 0, 0, 0]))).all()


# --------------------------------------------------------------------------------------------
# Noise floor
# --------------------------------------------------------------------------------------------


def test_floor_cells_use_english_rewordings_only(table, scored):
    cells = analyses.floor_cells(table, options=StudyOptions(n_permutations=500, seed=2))
    assert sorted(zip(cells["model"], cells["via"])) == [("m1", "human-1"), ("m1", "human-2"),
                                                         ("m2", "human-1"), ("m2", "human-2")]
    assert (cells["n"] == 12).all(), "the Spanish rewordings are not part of the floor"
    for row in cells.itertuples():
        d = _changes(scored, row.model, "rewording", "via", row.via).to_numpy()
        assert row.drop == pytest.approx(-d.mean())
        assert row.floor == pytest.approx(abs(d.mean()))
        assert row.p == pytest.approx(_scipy_exact(d), abs=1e-12), "n <= 16: exact"
        assert row.sd == pytest.approx(np.std(d, ddof=1))
        assert row.noise_only == pytest.approx(np.std(d, ddof=1) * np.sqrt(2 / np.pi / d.size))
    np.testing.assert_allclose(cells["q"], multipletests(cells["p"], method="fdr_bh")[1])


def test_noise_floor_by_route(table, scored):
    floor = analyses.noise_floor(table, options=StudyOptions(n_permutations=500, seed=2)).set_index("via")
    assert list(floor.index) == ["human-1", "human-2", "all routes"]
    cells = analyses.floor_cells(table, options=StudyOptions(n_permutations=500, seed=2))
    h1 = cells[cells.via == "human-1"]
    assert floor.loc["human-1", "floor"] == pytest.approx(h1["floor"].median())
    assert floor.loc["human-1", "noise_only"] == pytest.approx(h1["noise_only"].median())
    assert floor.loc["human-1", "reliable_cells"] == h1["reliable"].sum()
    # Texts: for human-1 a third of the items came back with the context unchanged (1 of 4 fields).
    assert floor.loc["human-1", "share_unchanged"] == pytest.approx((4 * 0.25 + 8 * 0.0) / 12)
    assert floor.loc["human-2", "share_unchanged"] == 1.0
    pairs = analyses.english_rewording_pairs(scored)
    h2 = pairs[pairs.via == "human-2"]
    # the paper's slope: one least-squares line through every model × item pair (numpy's polyfit)
    assert floor.loc["human-2", "slope"] == pytest.approx(np.polyfit(h2["soft_en"], h2["soft"], 1)[0])
    assert floor.loc["human-2", "same_choice"] == pytest.approx((h2.binary == h2.binary_en).mean())
    per_model = cells.groupby("model")["floor"].mean()  # a model's floor: the mean over its routes
    assert floor.loc["all routes", "floor"] == pytest.approx(per_model.median())
    assert floor.loc["all routes", "n_cells"] == 4
    similarity = pd.DataFrame({"item_id": pairs["item_id"].unique()}).assign(similarity=0.9)
    with_similarity = analyses.noise_floor(table, similarity=similarity, options=StudyOptions(n_permutations=100, seed=2))
    assert with_similarity["similarity"].tolist() == pytest.approx([0.9, 0.9, 0.9])


def test_a_models_floor_is_the_mean_over_its_routes():
    # Worked by hand: three routes move model a by 0.001, −0.004 and 0.025 (mean of |.| 0.010, median
    # 0.004); model b by 0.002 and 0.006 (0.004). Chapter 22's largest floor is 0.010, the typical 0.007.
    cells = pd.DataFrame({"model": ["a", "a", "a", "b", "b"], "via": ["de", "fi", "ja", "de", "fi"],
                          "floor": [0.001, 0.004, 0.025, 0.002, 0.006]})
    assert analyses.model_floors(cells).to_dict() == pytest.approx({"a": 0.010, "b": 0.004})
    rows = []
    for i in range(4):  # the same through noise_floor's "all routes" row, on scores with these shifts
        for model, shifts in (("a", {"de": 0.001, "fi": -0.004, "ja": 0.025}), ("b", {"de": 0.002, "fi": 0.006})):
            rows.append(score_row(model, f"b{i}", "en", 0.5))
            rows += [score_row(model, f"b{i}", "en", 0.5 - shift, variant="rewording", via=via)
                     for via, shift in shifts.items()]
    floor = analyses.noise_floor(pd.DataFrame(rows), options=StudyOptions(n_permutations=100, seed=0)).set_index("via")
    assert floor.loc["all routes", "floor"] == pytest.approx(0.007)
    assert floor.loc["ja", "floor"] == pytest.approx(0.025) and floor.loc["de", "floor"] == pytest.approx(0.0015)


def test_noise_floor_without_texts_or_rewordings(table):
    no_texts = table.assign(context=None, stereotyped=None, anti_stereotyped=None, third=None)
    assert analyses.noise_floor(no_texts, options=StudyOptions(n_permutations=100, seed=0))["share_unchanged"].isna().all()
    no_rewordings = table[table.variant != "rewording"]
    assert analyses.noise_floor(no_rewordings, options=StudyOptions(n_permutations=100, seed=0)).empty


# --------------------------------------------------------------------------------------------
# Model gaps
# --------------------------------------------------------------------------------------------


def test_model_gaps_by_hand_and_against_the_slow_bootstrap(table, scored):
    gaps = analyses.model_gaps(table, options=StudyOptions(n_permutations=500, n_bootstrap=300, seed=7)).set_index("model")
    for model in ("m1", "m2"):
        drops = {lang: -_changes(scored, model, "translation", "language", lang).mean() for lang in ("es", "sw")}
        floors = {via: abs(_changes(scored, model, "rewording", "via", via).mean()) for via in ("human-1", "human-2")}
        gap = np.mean([abs(v) for v in drops.values()])
        row = gaps.loc[model]
        assert row["gap"] == pytest.approx(gap)
        assert row["clci"] == pytest.approx(1 - gap)
        assert row["floor"] == pytest.approx(np.median(list(floors.values())))
        assert row["gap_minus_floor"] == pytest.approx(gap - np.median(list(floors.values())))
        english = scored[(scored.model == model) & (scored.variant == "original")]
        assert row["english_soft"] == pytest.approx(english["soft"].mean())
        assert row["english_binary"] == pytest.approx(english["binary"].mean())
        assert row["above_floor"] == (row["low"] > 0)

        # The same bootstrap written slowly: resample base items (all their versions move together).
        translation = analyses.paired_with_english(scored)
        reworded = analyses.english_rewording_pairs(scored)
        both = pd.concat([translation.assign(key=translation["language"]), reworded.assign(key=reworded["via"])])
        both = both[both.model == model][["base_id", "key", "change"]]

        def statistic(sample: pd.DataFrame) -> float:
            means = sample.groupby("key")["change"].mean().abs()
            return float(means[["es", "sw"]].mean() - means[["human-1", "human-2"]].median())

        seed = [7, stats.group_seed_key(("model_gaps", model))]
        # Clusters in the order of the English originals, as model_gaps numbers them.
        order = {b: k for k, b in enumerate(english["base_id"].unique())}
        both = both.assign(order=both["base_id"].map(order)).sort_values("order", kind="stable")
        reference = stats.cluster_bootstrap(both, cluster="base_id", statistic=statistic, n_boot=300, seed=seed)
        assert (row["gap_minus_floor"], row["low"], row["high"]) == pytest.approx(reference, rel=1e-9)
    cells = analyses.cell_tests(table, options=StudyOptions(n_permutations=500, seed=7))
    for model, group in cells.groupby("model"):
        assert gaps.loc[model, "reliable_drops"] == (group["reliable"] & (group["drop"] > 0)).sum()
    mean_floor = analyses.model_gaps(table, floor_over_routes="mean", options=StudyOptions(n_permutations=100, n_bootstrap=50, seed=7))
    assert mean_floor.set_index("model").loc["m1", "floor"] == pytest.approx(
        np.mean([abs(_changes(scored, "m1", "rewording", "via", v).mean()) for v in ("human-1", "human-2")]))


def test_model_drop_table_marks_reliable_cells():
    cells = pd.DataFrame({"model": ["a", "a", "b", "b"], "language": ["es", "sw", "es", "sw"],
                          "drop": [0.01234, -0.02, 0.1, 0.0], "reliable": [False, False, True, False],
                          "noise_only": [0.01, 0.03, 0.02, 0.02]})
    table = analyses.model_drop_table(cells)
    assert table.loc["b", "es"] == "0.100†" and table.loc["a", "es"] == "0.012" and table.loc["a", "sw"] == "-0.020"
    assert table.loc["a", "noise only"] == "0.020" and list(table.columns) == ["es", "sw", "noise only"]


# --------------------------------------------------------------------------------------------
# Carry-over
# --------------------------------------------------------------------------------------------


def test_carry_over_pairs_kinds(table):
    pairs = analyses.carry_over_pairs(table)
    counts = pairs.groupby(["change", "group"]).size().to_dict()
    assert counts == {("rewording", "human-1"): 24, ("rewording", "human-2"): 24, ("translation", "es"): 24,
                      ("translation", "sw"): 24, ("within-language rewording", "es"): 24}
    within = pairs[pairs.change == "within-language rewording"].set_index(["model", "base_id"])
    scored = analyses.item_scores(table)
    spanish = scored[(scored.variant == "translation") & (scored.language == "es")].set_index(["model", "base_id"])
    np.testing.assert_allclose(within["before"], spanish.loc[within.index, "soft"])


def test_carry_over_table_one_model_matches_linregress(table):
    one = table[table.model == "m1"]
    out = analyses.carry_over_table(one, options=StudyOptions(n_bootstrap=200, seed=3)).set_index(["change", "group"])
    pairs = analyses.carry_over_pairs(one)
    for (change, group), row in out.iterrows():
        chunk = pairs[pairs.change == change]
        if group != "all":
            chunk = chunk[chunk.group == group]
        fit = sps.linregress(chunk["before"], chunk["after"])
        assert row["slope"] == pytest.approx(fit.slope) and row["r"] == pytest.approx(fit.rvalue)
        assert row["sd_ratio"] == pytest.approx(chunk["after"].std() / chunk["before"].std())
        assert row["slope"] == pytest.approx(row["r"] * row["sd_ratio"])
        assert row["same_choice"] == pytest.approx((chunk["binary_before"] == chunk["binary_after"]).mean())
        assert row["strength_after"] == pytest.approx((chunk["after"] - 0.5).abs().mean())
        assert row["slope_low"] <= row["slope"] <= row["slope_high"]
        assert row["n_pairs"] == len(chunk)


def test_carry_over_table_pools_every_pair_as_the_paper_and_within_models_beside(table):
    # Two models whose scores sit at different levels: pooling as they are and within models then differ.
    shifted = table.copy()
    m2 = shifted["model"] == "m2"
    for option in ("stereotyped",):  # lift m2's stereotyped log-probs: its soft scores rise everywhere
        shifted.loc[m2, f"lp_mean_{option}"] += 0.6
        shifted.loc[m2, f"lp_sum_{option}"] += 0.6 * shifted.loc[m2, f"ntok_{option}"]
    out = analyses.carry_over_table(shifted, options=StudyOptions(n_bootstrap=300, seed=3)).set_index(
        ["change", "group"])
    pairs = analyses.carry_over_pairs(shifted)
    chunk = pairs[pairs.change == "translation"]
    row = out.loc[("translation", "all")]
    # The paper's: a least-squares line through every model × item pair as it is (numpy's polyfit).
    assert row["slope"] == pytest.approx(np.polyfit(chunk["before"], chunk["after"], 1)[0])
    assert row["r"] == pytest.approx(np.corrcoef(chunk["before"], chunk["after"])[0, 1])
    assert row["sd_ratio"] == pytest.approx(chunk["after"].std() / chunk["before"].std())
    # Within models: least squares with a level per model (statsmodels).
    fit = smf.ols("after ~ before + C(model)", data=chunk).fit()
    assert row["slope_within"] == pytest.approx(fit.params["before"])
    centred = chunk.assign(x=chunk["before"] - chunk.groupby("model")["before"].transform("mean"),
                           y=chunk["after"] - chunk.groupby("model")["after"].transform("mean"))
    assert row["r_within"] == pytest.approx(np.corrcoef(centred["x"], centred["y"])[0, 1])
    assert abs(row["slope"] - row["slope_within"]) > 0.01, "the models' levels differ, so the two fits do"
    assert row["n_models"] == 2 and row["n_items"] == 12 and row["n_pairs"] == 48
    assert analyses.carry_point(analyses.paired_with_english(analyses.item_scores(shifted)))["slope"] == \
        pytest.approx(row["slope"])

    # Its bootstrap interval, written slowly with the general cluster bootstrap and the same seed.
    def slope(sample: pd.DataFrame) -> float:
        return float(np.polyfit(sample["before"], sample["after"], 1)[0])

    ordered = chunk.assign(order=chunk["base_id"].map({b: k for k, b in enumerate(chunk["base_id"].unique())}))
    reference = stats.cluster_bootstrap(ordered.sort_values("order", kind="stable"), cluster="base_id",
                                        statistic=slope, n_boot=300,
                                        seed=[3, stats.group_seed_key(("carry_over", "translation", "all"))])
    assert (row["slope"], row["slope_low"], row["slope_high"]) == pytest.approx(reference, rel=1e-8)
    by_model = analyses.carry_over_table(table, by_model=True, options=StudyOptions(n_bootstrap=50, seed=3))
    assert set(by_model["model"]) == {"m1", "m2"}


# --------------------------------------------------------------------------------------------
# Detection power
# --------------------------------------------------------------------------------------------


def test_detection_hand_worked_zero_changes():
    # Rewording changed nothing (every change 0): lowering by any δ > 0 gives 8 changes of −δ,
    # whose exact sign-flip p is 2 / 2**8 (only all-plus and all-minus reach |mean| δ); at δ = 0, p = 1.
    rows = []
    for model in ("m1", "m2"):
        for i in range(8):
            rows.append(_record(model, f"b{i}", "en", "original", "human", 0.6 + 0.02 * i))
            rows.append(_record(model, f"b{i}", "en", "rewording", "human-1", 0.6 + 0.02 * i))
    power = analyses.detection_power(pd.DataFrame(rows), deltas=[0.0, 0.001, 0.05], n_runs=5, options=StudyOptions(seed=1))
    assert power["detected"].tolist() == [0.0, 1.0, 1.0]
    assert power["false_alarm"].iloc[0] == 0.0 and np.isnan(power["false_alarm"].iloc[1])
    assert (power["n_cells"] == 2).all() and (power["n_runs"] == 5).all()


def test_detection_calibrated_and_rising():
    table = study(seed=11, n_items=40, models=("m1", "m2", "m3", "m4"), floor_sd=0.05)
    deltas = [0.0, 0.01, 0.02, 0.04]
    power = analyses.detection_power(table, deltas=deltas, n_runs=200, options=StudyOptions(n_permutations=1_000, seed=5)).set_index("delta")
    tested = 200 * 8
    assert power.loc[0.0, "detected"] <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / tested)
    assert power.loc[0.0, "any_detected"] <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 200)
    assert power["detected"].is_monotonic_increasing
    assert power.loc[0.04, "detected"] > 0.9  # 0.04 is about 5 standard errors of the mean change
    again = analyses.detection_power(table.sample(frac=1.0, random_state=2), deltas=deltas, n_runs=200, options=StudyOptions(n_permutations=1_000, seed=5)).set_index("delta")
    pd.testing.assert_frame_equal(power, again)
    one = analyses.detection_power(table, deltas=deltas, n_runs=200, inject="one", options=StudyOptions(n_permutations=1_000, seed=5)).set_index("delta")
    assert (one["false_alarm"] <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / (200 * 7))).all()
    assert one.loc[0.04, "detected"] > one.loc[0.0, "detected"]
    with pytest.raises(ValueError, match="inject"):
        analyses.detection_power(table, inject="some")


# --------------------------------------------------------------------------------------------
# cell_tests extensions
# --------------------------------------------------------------------------------------------


def test_cell_tests_languages_filter_and_spread(table, scored):
    everything = analyses.cell_tests(table, variant="rewording", group="via", options=StudyOptions(n_permutations=200, seed=1))
    english = analyses.cell_tests(table, variant="rewording", group="via", languages=["en"], options=StudyOptions(n_permutations=200, seed=1))
    m1 = everything[(everything.model == "m1") & (everything.via == "human-1")].iloc[0]
    assert m1["n"] == 24, "without the filter the Spanish rewordings join the human-1 cell"
    assert (english["n"] == 12).all()
    cells = analyses.cell_tests(table, options=StudyOptions(n_permutations=200, seed=1))
    sw = _changes(scored, "m2", "translation", "language", "sw")
    row = cells[(cells.model == "m2") & (cells.language == "sw")].iloc[0]
    assert row["sd"] == pytest.approx(sw.std(ddof=1))
    assert row["noise_only"] == pytest.approx(stats.noise_only(sw.to_numpy()))


def test_every_chapter_gives_one_carry_over_slope(table):
    """Chapters 10 (per-language table), 11 (floor per route) and 13 (carry-over table) give the paper's
    slope (every pair pooled) for the same pairs (chapter 20's ablation calls `carry_point` too)."""
    options = StudyOptions(n_permutations=200, n_bootstrap=50, seed=1)
    drops = analyses.language_drops(table, options=options).set_index("language")
    carry = analyses.carry_over_table(table, options=options).set_index(["change", "group"])
    languages = [lang for lang in drops.index if lang != "en"]
    assert languages
    for language in languages:
        assert drops.loc[language, "slope"] == pytest.approx(carry.loc[("translation", language), "slope"])
    floor = analyses.noise_floor(table, options=options).set_index("via")
    assert len(floor) > 1
    for via in floor.index.drop("all routes"):
        assert floor.loc[via, "slope"] == pytest.approx(carry.loc[("rewording", via), "slope"])
