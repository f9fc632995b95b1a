"""The later chapters' analyses (sources, dimensions, faithful translations, summed scores, model
agreement, the three pipeline errors, the case study) on small hand-built scores tables whose
answers are worked out by hand or with numpy, scipy and statsmodels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.analyses.stats import sign_flip_pvalue
from biasaudit.core.options import StudyOptions
from biasaudit.core.store import ScoreStore
from biasaudit.lm.tokens import boundary_example
from biasaudit.run import pipeline
from conftest import score_row
from scipy.special import expit, logit
from scipy.stats import permutation_test
from statsmodels.stats.multitest import multipletests

FIXTURES = Path(__file__).parent / "fixtures"


# --------------------------------------------------------------------------------------------
# Building scores tables
# --------------------------------------------------------------------------------------------


record = score_row


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# By source (chapter 14)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_sources() -> pd.DataFrame:
    """Written and BBQ items translated into es and sw (BBQ shifts are four times larger);
    StereoSet items in English only. English leans to the stereotype (0.5 to 0.8); translation
    halves the distance from 0.5 and shifts down by a per-item amount, so every change is
    negative; rewording keeps the English score."""
    rng = np.random.default_rng(11)
    rows = []
    for model in ("m1", "m2"):
        for source, n, scale in (("written", 10, 1.0), ("bbq", 8, 4.0), ("stereoset", 6, None)):
            for i in range(n):
                base = f"{source}-{i}"
                english = float(rng.uniform(0.5, 0.8))
                rows.append(record(model, base, "en", english, source=source))
                rows.append(record(model, base, "en", english, variant="rewording", via="human-1", source=source))
                if scale is None:
                    continue
                for language in ("es", "sw"):
                    shift = -0.01 * scale * (1 + i % 3)
                    rows.append(record(model, base, language, 0.5 + 0.5 * (english - 0.5) + shift, source=source))
    return table(rows)


def test_by_source_drop_is_the_mean_over_items_of_the_item_changes(three_sources):
    result = analyses.by_source(three_sources, options=StudyOptions(n_permutations=500, n_bootstrap=500)).set_index("source")
    assert list(result.index) == ["stereoset", "bbq", "written", "bbq + written"]
    pairs = analyses.paired_with_english(analyses.item_scores(three_sources))
    for source in ("bbq", "written"):
        mine = pairs.loc[pairs["source"] == source]
        expected = -mine.groupby("base_id")["change"].mean().mean()
        row = result.loc[source]
        assert row["drop"] == pytest.approx(expected)
        assert row["drop_low"] <= row["drop"] <= row["drop_high"]
        assert row["n_items"] == row["n_translated"] == mine["base_id"].nunique()
        assert row["n_cells"] == 4 and row["n_languages"] == 2
    pooled = pairs.loc[pairs["source"].isin(["bbq", "written"])]
    assert result.loc["bbq + written", "drop"] == pytest.approx(-pooled.groupby("base_id")["change"].mean().mean())
    assert result.loc["bbq + written", "n_items"] == 18


def test_by_source_tests_each_source_as_its_own_family(three_sources):
    result = analyses.by_source(three_sources, options=StudyOptions(n_permutations=500, n_bootstrap=200)).set_index("source")
    scored = analyses.item_scores(three_sources)
    pairs = analyses.paired_with_english(scored)
    for source, n_items in (("written", 10), ("bbq", 8)):
        mine = pairs.loc[pairs["source"] == source]
        p, p_binary = [], []
        for _, cell in mine.groupby(["model", "language"]):
            p.append(sign_flip_pvalue(cell["change"].to_numpy(), rng=np.random.default_rng(0)))  # exact: n <= 16
            p_binary.append(sign_flip_pvalue(cell["change_binary"].to_numpy(), rng=np.random.default_rng(0)))
        q = multipletests(p, method="fdr_bh")[1]
        expected = int(sum(qv < 0.05 for qv in q))  # every change here is negative: reliable cells are drops
        assert result.loc[source, "reliable_drops"] == expected
        assert result.loc[source, "reliable_rises"] == 0
        assert result.loc[source, "cells_below_english"] == len(p) == 4, "every change is negative: each cell drops"
        # binary scores: the same test on each pair's change of binary choice, BH among the source's cells
        assert result.loc[source, "reliable_binary"] == int(sum(multipletests(p_binary, method="fdr_bh")[1] < 0.05))
    assert result.loc["bbq", "reliable_drops"] == 4, "large, consistent BBQ shifts are caught in every cell"
    # pooled, 18 items a cell: enough for binary flips to be reliable (scipy's one-sample sign flips as reference)
    pooled = pairs.loc[pairs["source"].isin(["bbq", "written"])]
    p_binary = [permutation_test((cell["change_binary"].to_numpy(),), np.mean, permutation_type="samples",
                                 n_resamples=20_000, rng=np.random.default_rng(1)).pvalue
                for _, cell in pooled.groupby(["model", "language"])]
    expected = int(sum(multipletests(p_binary, method="fdr_bh")[1] < 0.05))
    assert result.loc["bbq + written", "reliable_binary"] == expected > 0


def test_by_source_carry_over_and_a_source_without_translations(three_sources):
    result = analyses.by_source(three_sources, options=StudyOptions(n_permutations=200, n_bootstrap=200)).set_index("source")
    stereoset = result.loc["stereoset"]
    assert stereoset["n_items"] == 6 and stereoset["n_translated"] == 0 and stereoset["n_cells"] == 0
    assert np.isnan(stereoset["drop"]) and np.isnan(stereoset["slope_translation"])
    assert stereoset["slope_rewording"] == pytest.approx(1.0) and stereoset["same_choice_rewording"] == 1.0
    scored = analyses.item_scores(three_sources)
    english = scored.loc[(scored["source"] == "stereoset") & (scored["variant"] == "original")]
    assert stereoset["english_soft"] == pytest.approx(english["soft"].mean())
    assert result.loc["written", "slope_rewording"] == pytest.approx(1.0)
    # translated = 0.5 + (english − 0.5) / 2 + a shift that depends on the item: slope by least squares
    pairs = analyses.paired_with_english(scored)
    mine = pairs.loc[pairs["source"] == "written"]
    # the paper's slope: every model × item pair pooled as it is (numpy's polyfit)
    assert result.loc["written", "slope_translation"] == pytest.approx(np.polyfit(mine["soft_en"], mine["soft"], 1)[0])


def test_by_source_with_custom_groups(three_sources):
    result = analyses.by_source(three_sources, groups={"everything": ["stereoset", "bbq", "written"]}, options=StudyOptions(n_permutations=200, n_bootstrap=200))
    assert result["source"].tolist() == ["everything"] and result["n_items"].iloc[0] == 24


# --------------------------------------------------------------------------------------------
# By dimension (chapter 15)
# --------------------------------------------------------------------------------------------


def test_by_dimension_counts_reversals_by_hand():
    rows = []
    # gender: 3 items; English 0.8, 0.7, 0.52; translations 0.3 (reversed), 0.6 (kept), 0.2 (not leaning before)
    for base, english, translated in (("g1", 0.8, 0.3), ("g2", 0.7, 0.6), ("g3", 0.52, 0.2)):
        rows += [record("m", base, "en", english), record("m", base, "fr", translated)]
    # race: 2 items, both leaning and both reversed, plus a rewording each
    for base, english, translated in (("r1", 0.9, 0.4), ("r2", 0.6, 0.1)):
        rows += [record("m", base, "en", english, dimension="race"), record("m", base, "fr", translated, dimension="race"),
                 record("m", base, "en", english - 0.05, variant="rewording", via="h1", dimension="race")]
    result = analyses.by_dimension(table(rows), options=StudyOptions(n_bootstrap=200)).set_index("dimension")
    assert list(result.index) == ["gender", "race", "all"]
    assert (result.loc["gender", "n_leaning"], result.loc["gender", "n_reversed"]) == (2, 1)
    assert (result.loc["race", "n_leaning"], result.loc["race", "n_reversed"]) == (2, 2)
    assert result.loc["all", "reversal_share"] == pytest.approx(3 / 4)
    assert result.loc["gender", "drop"] == pytest.approx(np.mean([0.5, 0.1, 0.32]))
    assert result.loc["race", "drop"] == pytest.approx(0.5)
    assert result.loc["race", "r_translation"] == pytest.approx(1.0), "two points are always on a line"
    assert result.loc["race", "r_rewording"] == pytest.approx(1.0) and np.isnan(result.loc["gender", "r_rewording"])
    wider = analyses.by_dimension(table(rows), lean=0.25, options=StudyOptions(n_bootstrap=200)).set_index("dimension")
    assert (wider.loc["all", "n_leaning"], wider.loc["all", "n_reversed"]) == (2, 0), "g1, r1 lean above 0.75; none falls below 0.25"
    with pytest.raises(ValueError, match="lean"):
        analyses.by_dimension(table(rows), lean=0.6)


# --------------------------------------------------------------------------------------------
# Faithful translations (chapter 16)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def faithful_case() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two models, 6 items, es and sw. Unfaithful versions lose 0.2; faithful ones 0.05."""
    rows, judged = [], []
    for model in ("m1", "m2"):
        for i in range(6):
            base = f"b{i}"
            rows.append(record(model, base, "en", 0.7, source="stereoset" if i < 2 else "written"))
            rows.append(record(model, base, "en", 0.68, variant="rewording", via="de",
                               source="stereoset" if i < 2 else "written"))
            for language, unfaithful in (("es", {0}), ("sw", {0, 1, 2})):
                loss = 0.2 if i in unfaithful else 0.05
                rows.append(record(model, base, language, 0.7 - loss, source="stereoset" if i < 2 else "written"))
    for i in range(6):
        judged.append({"item_id": f"b{i}/es", "similarity": 0.5 if i == 0 else 0.95})
        if i != 5:  # b5/sw is not judged: it counts as not faithful
            judged.append({"item_id": f"b{i}/sw", "similarity": 0.5 if i in (0, 1, 2) else 0.92})
    return table(rows), pd.DataFrame(judged)


def test_faithful_only_by_hand(faithful_case):
    scores, similarity = faithful_case
    result = analyses.faithful_only(scores, similarity, options=StudyOptions(n_bootstrap=300)).set_index("language")
    es, sw, mean = result.loc["es"], result.loc["sw"], result.loc["mean"]
    assert es["drop_all"] == pytest.approx((0.2 + 5 * 0.05) / 6)
    assert es["drop_faithful"] == pytest.approx(0.05)
    assert sw["drop_all"] == pytest.approx((3 * 0.2 + 3 * 0.05) / 6)
    assert sw["drop_faithful"] == pytest.approx(0.05)  # b3, b4 faithful; b5 unjudged
    assert (es["n_all"], es["n_faithful"], sw["n_faithful"], sw["n_unjudged"]) == (12, 10, 4, 2)
    assert mean["drop_all"] == pytest.approx((es["drop_all"] + sw["drop_all"]) / 2), "languages weigh the same"
    assert mean["reduction"] == pytest.approx(mean["drop_all"] - mean["drop_faithful"])
    for row in (es, sw, mean):
        assert row["reduction_low"] <= row["reduction"] + 1e-12 and row["reduction"] <= row["reduction_high"] + 1e-12
    assert analyses.version_similarity(similarity, threshold=0.93)["faithful"].sum() == 5


def test_faithful_only_needs_the_columns(faithful_case):
    scores, similarity = faithful_case
    with pytest.raises(KeyError, match="item_id and similarity"):
        analyses.faithful_only(scores, similarity.rename(columns={"similarity": "cosine"}))


def test_against_rewording_by_hand(faithful_case):
    scores, similarity = faithful_case
    result = analyses.against_rewording(scores, similarity, options=StudyOptions(n_permutations=500, n_bootstrap=300))
    assert list(dict.fromkeys(result["subset"])) == ["all items", "faithful in every language", "without StereoSet"]
    everything = result.loc[result["subset"] == "all items"].set_index("language")
    # per item: translation drop 0.2 or 0.05, rewording drop 0.02
    excess = {"es": [0.18] + [0.03] * 5, "sw": [0.18] * 3 + [0.03] * 3}
    for language, d in excess.items():
        assert everything.loc[language, "excess_drop"] == pytest.approx(np.mean(d))
        assert everything.loc[language, "rewording_drop"] == pytest.approx(0.02)
        assert everything.loc[language, "p"] == pytest.approx(sign_flip_pvalue(np.array(d), rng=np.random.default_rng(0)))
    assert np.allclose(everything["q"], multipletests(everything["p"], method="fdr_bh")[1])
    preserved = result.loc[result["subset"] == "faithful in every language"]
    assert set(preserved["n_items"]) == {2}, "b3 and b4 are faithful in both languages (b5/sw is unjudged)"
    assert preserved["excess_drop"].tolist() == pytest.approx([0.03, 0.03])
    without = result.loc[result["subset"] == "without StereoSet"].set_index("language")
    assert without.loc["sw", "n_items"] == 4 and without.loc["sw", "excess_drop"] == pytest.approx((0.18 + 3 * 0.03) / 4)
    # The paper's "contrast preserved": the versions its contrast judgments call preserved, language by language
    judgments = pd.DataFrame({"item_id": ["b0/es", "b1/es", "b2/es", "b1/sw", "b4/sw", "b5/sw"],
                              "judgment": ["lost", "preserved", "preserved", "preserved", "partly", "preserved"]})
    judged = analyses.against_rewording(scores, similarity, options=StudyOptions(n_permutations=200, n_bootstrap=100),
                                        judgments=judgments)
    contrast = judged.loc[judged["subset"] == "contrast preserved"].set_index("language")
    # es: b1, b2 (excess 0.03 each); sw: b1 (0.18) and b5 (0.03)
    assert contrast["n_items"].to_dict() == {"es": 2, "sw": 2}
    assert contrast.loc["es", "excess_drop"] == pytest.approx(0.03)
    assert contrast.loc["sw", "excess_drop"] == pytest.approx((0.18 + 0.03) / 2)
    # "contrast not lost" keeps the partly preserved too: es b1, b2; sw b1, b4, b5
    kept = judged.loc[judged["subset"] == "contrast not lost"].set_index("language")
    assert kept["n_items"].to_dict() == {"es": 2, "sw": 3}
    # es holds the same items in both subsets: the same mean shows the same interval (one number, one interval)
    assert kept.loc["es", ["excess_drop", "low", "high"]].tolist() == contrast.loc["es", ["excess_drop", "low",
                                                                                          "high"]].tolist()
    no_judge = analyses.against_rewording(scores, options=StudyOptions(n_permutations=200, n_bootstrap=100))
    assert "faithful in every language" not in set(no_judge["subset"])


# --------------------------------------------------------------------------------------------
# Summed against per-token mean (chapter 17)
# --------------------------------------------------------------------------------------------


def test_summed_vs_mean_by_hand():
    rows = []
    for model in ("m1", "m2"):
        for i in range(8):
            english, translated = 0.6 + 0.02 * i, 0.55 + 0.02 * i
            rows.append(record(model, f"b{i}", "en", english, ntok=(2, 2)))
            # the stereotyped translation takes one token more: sums penalise it
            rows.append(record(model, f"b{i}", "ko", translated, ntok=(3, 2)))
    scores = table(rows)
    assert analyses.has_aggregate(scores, "sum") and analyses.has_aggregate(scores, "mean")
    result = analyses.summed_vs_mean(scores, options=StudyOptions(n_permutations=200)).set_index("language")
    assert result.index[0] == "en"
    assert result.loc["en", "soft_mean"] == pytest.approx(np.mean([0.6 + 0.02 * i for i in range(8)]))
    # sums: contrast = 2 (lp_s − lp_a) in English; 3 lp_s − 2 lp_a in Korean, where (conftest.score_row,
    # c = logit(soft) > 0) lp_a = −1 − c and lp_s = −1: 3(−1) − 2(−1 − c) = 2c − 1
    english = [expit(2 * logit(0.6 + 0.02 * i)) for i in range(8)]
    korean = [expit(2 * logit(0.55 + 0.02 * i) - 1) for i in range(8)]
    assert result.loc["en", "soft_sum"] == pytest.approx(np.mean(english))
    assert result.loc["ko", "drop_sum"] == pytest.approx(np.mean(english) - np.mean(korean))
    assert result.loc["ko", "drop_mean"] == pytest.approx(0.05)
    assert result.loc["ko", "token_gap"] == 1.0 and result.loc["en", "token_gap"] == 0.0
    same = np.mean([(c > 0) == (2 * c - 1 > 0) for c in logit([0.55 + 0.02 * i for i in range(8)])])
    assert result.loc["ko", "same_binary"] == pytest.approx(same)
    means_only = scores.assign(lp_sum_stereotyped=np.nan)
    assert not analyses.has_aggregate(means_only, "sum")
    with pytest.raises(ValueError, match="summed log-probs"):
        analyses.summed_vs_mean(means_only)


# --------------------------------------------------------------------------------------------
# Model agreement (chapter 18)
# --------------------------------------------------------------------------------------------


def test_model_agreement_pairs_and_center():
    rng = np.random.default_rng(5)
    english = rng.uniform(0.3, 0.8, size=12)
    noise = rng.normal(0, 0.05, size=12)
    rows = []
    for model, sign in (("m1", 1.0), ("m2", 1.0), ("m3", -1.0)):
        for i in range(12):
            rows.append(record(model, f"b{i}", "en", english[i]))
            # translated = 0.51 + (english − 0.5) / 2 ± noise: the change's noise part is shared (m1, m2) or mirrored (m3)
            rows.append(record(model, f"b{i}", "hi", 0.51 + 0.5 * (english[i] - 0.5) + sign * noise[i]))
    result = analyses.model_agreement(table(rows), frequency=False).set_index("group")
    assert result.loc["en", "agreement_scores"] == pytest.approx(1.0)
    assert result.loc["en", "n_model_pairs"] == 3
    change = 0.01 - 0.5 * (english - 0.5) + noise
    mirrored = 0.01 - 0.5 * (english - 0.5) - noise
    r = np.corrcoef(change, mirrored)[0, 1]
    assert result.loc["hi", "agreement_change"] == pytest.approx((1 + 2 * r) / 3)
    changes = np.concatenate([change, change, mirrored])
    assert result.loc["hi", "sd_change"] == pytest.approx(changes.std(ddof=1))
    fit = np.polyfit(np.tile(english, 3), np.tile(english, 3) + changes, 1)
    assert result.loc["hi", "center"] == pytest.approx(fit[1] + fit[0] * 0.5)
    assert result.loc["hi", "center"] == pytest.approx(0.51, abs=0.03)


def test_model_agreement_regresses_out_surface_properties():
    rng = np.random.default_rng(8)
    rows = []
    for model in ("m1", "m2"):
        for i in range(16):
            english = float(rng.uniform(0.4, 0.7))
            extra = int(i % 4)  # token-count difference of the translated continuations
            rows.append(record(model, f"b{i}", "en", english, ntok=(3, 3)))
            rows.append(record(model, f"b{i}", "ar", english - 0.1 + 0.03 * extra + (0.02 if model == "m2" else 0.0),
                               ntok=(3 + extra, 3)))
    result = analyses.model_agreement(table(rows), frequency=False).set_index("group")
    arabic = result.loc["ar"]
    assert "token_diff" in arabic["features"] and "zipf_diff" not in arabic["features"]
    assert arabic["r2"] == pytest.approx(1.0), "the change is the model's level plus 0.03 per extra token"
    levels = [-0.1] * 16 + [-0.08] * 16  # only the model levels remain
    assert arabic["sd_change_adjusted"] == pytest.approx(np.std(levels, ddof=1))
    assert arabic["r2_model"] < arabic["r2"]


def test_model_agreement_without_surface_properties():
    rows = []
    for i in range(5):
        rows += [record("m", f"b{i}", "en", 0.5 + 0.05 * i), record("m", f"b{i}", "sw", 0.5 + 0.03 * i)]
    scores = table(rows).drop(columns=[c for c in table(rows).columns if c.startswith(("ntok_", "lp_sum_"))])
    scores[["stereotyped", "anti_stereotyped"]] = None
    result = analyses.model_agreement(scores).set_index("group")
    assert np.isnan(result.loc["sw", "agreement_change"]) and result.loc["sw", "n_model_pairs"] == 0
    assert result.loc["sw", "features"] == "" and np.isnan(result.loc["sw", "r2"])
    # sw = 0.5 + 0.03 i and en = 0.5 + 0.05 i: the least-squares line is sw = 0.5 + 0.6 (en − 0.5), which
    # passes through 0.5 at en = 0.5
    assert result.loc["sw", "center"] == pytest.approx(0.5, abs=1e-9)


def test_word_frequency_support_says_why():
    pytest.importorskip("wordfreq")
    support = analyses.word_frequency_support(["en", "sw"]).set_index("language")
    assert support.loc["en", "available"] and not support.loc["sw", "available"]
    assert "no word list" in support.loc["sw", "note"]


def test_surface_properties_by_hand():
    wordfreq = pytest.importorskip("wordfreq")
    rows = [record("m", "b0", "en", 0.6, ntok=(4, 2), texts=("The nurse", "was very tired", "was happy", "sky")),
            record("m", "b0", "sw", 0.6, ntok=(5, 1), texts=("Muuguzi", "alikuwa amechoka", "alifurahi", "anga"))]
    surface = analyses.surface_properties(table(rows)).set_index("language")
    assert surface.loc["en", "token_diff"] == 2 and surface.loc["en", "length"] == 3
    expected = (np.mean([wordfreq.zipf_frequency(w, "en") for w in ("was", "very", "tired")])
                - np.mean([wordfreq.zipf_frequency(w, "en") for w in ("was", "happy")]))
    assert surface.loc["en", "zipf_diff"] == pytest.approx(expected)
    assert np.isnan(surface.loc["sw", "zipf_diff"]), "wordfreq has no Swahili: no frequency, not English's"


# --------------------------------------------------------------------------------------------
# The three pipeline errors (chapter 20)
# --------------------------------------------------------------------------------------------


def test_error_settings_and_names():
    settings = analyses.error_settings()
    assert len(settings) == 8 and len({tuple(s.values()) for s in settings}) == 8
    assert analyses.setting_name(settings[0]) == "none"
    assert analyses.setting_name(settings[-1]) == "stereoset_label_map + bbq_roles_by_order + scorer_boundary"


def test_label_errors_by_hand():
    rows_fixed, rows_broken = [], []
    for i in range(6):
        for model in ("m1", "m2"):
            rows_fixed += [record(model, f"s{i}", "en", 0.7, source="stereoset"),
                           record(model, f"s{i}", "fr", 0.6, source="stereoset")]
            # the label map swaps the roles: soft becomes 1 − soft
            rows_broken += [record(model, f"s{i}", "en", 0.3, source="stereoset", ntok=(0, 2)),
                            record(model, f"s{i}", "fr", 0.4, source="stereoset")]
    stacked = pd.concat([table(rows_fixed).assign(stereoset_label_map=False),
                         table(rows_broken).assign(stereoset_label_map=True)], ignore_index=True)
    result = analyses.label_errors(stacked, options=StudyOptions(n_permutations=200)).set_index("setting")
    assert list(result.index) == ["none", "stereoset_label_map"]
    assert result.loc["none", "english_soft"] == pytest.approx(0.7)
    assert result.loc["stereoset_label_map", "english_soft"] == pytest.approx(0.3)
    assert result.loc["none", "english_binary"] == 1.0 and result.loc["stereoset_label_map", "english_binary"] == 0.0
    assert (result.loc["none", "n_cells"], result.loc["none", "cells_below"]) == (2, 2)
    assert result.loc["stereoset_label_map", "cells_below"] == 0, "the language now scores above English"
    assert result.loc["none", "reliable_drops"] == 2, "6 identical changes: exact p = 2/64 in both cells, q < 0.05"
    assert result.loc["stereoset_label_map", "reliable_drops"] == 0
    assert result.loc["stereoset_label_map", "empty_options"] == 12 and result.loc["none", "empty_options"] == 0
    assert not result["scorer_boundary"].any()
    per_source = analyses.label_errors(stacked, by="source", options=StudyOptions(n_permutations=200))
    assert set(per_source["source"]) == {"stereoset"}


def released_raw() -> pd.DataFrame:
    """Four English items as a release stores them (per-token means only): StereoSet, two BBQ, one written."""
    rows = [record("m", "ss_1", "en", 0.8, source="stereoset"), record("m", "bbq_A_1", "en", 0.6, source="bbq"),
            record("m", "bbq_A_2", "en", 0.9, source="bbq"), record("m", "gp_1", "en", 0.7)]
    return table(rows).drop(columns=[c for c in table(rows).columns if c.startswith(("lp_sum", "ntok"))])


def test_released_label_settings_permute_by_the_map():
    raw = released_raw()
    fix = {"ss_1": {"stereotype": "anti_stereotype", "anti_stereotype": "stereotype", "unrelated": "unrelated"},
           "bbq_A_1": {"stereotype": "unrelated", "anti_stereotype": "stereotype", "unrelated": "anti_stereotype"},
           "bbq_A_2": None}
    settings = analyses.released_label_settings(raw, fix)
    assert len(settings) == 4 * 3 and "bbq_A_2" not in set(settings["base_id"])
    fixed = settings.loc[~settings["stereoset_label_map"] & ~settings["bbq_roles_by_order"]].set_index("base_id")
    raw_rows = raw.set_index("base_id")
    assert fixed.loc["ss_1", "lp_mean_stereotyped"] == raw_rows.loc["ss_1", "lp_mean_anti_stereotyped"]
    assert fixed.loc["bbq_A_1", "lp_mean_stereotyped"] == raw_rows.loc["bbq_A_1", "lp_mean_third"]
    assert fixed.loc["bbq_A_1", "lp_mean_third"] == raw_rows.loc["bbq_A_1", "lp_mean_anti_stereotyped"]
    assert fixed.loc["gp_1", "lp_mean_stereotyped"] == raw_rows.loc["gp_1", "lp_mean_stereotyped"]
    only_map = settings.loc[settings["stereoset_label_map"] & ~settings["bbq_roles_by_order"]].set_index("base_id")
    assert only_map.loc["ss_1", "lp_mean_stereotyped"] == raw_rows.loc["ss_1", "lp_mean_stereotyped"]
    assert only_map.loc["bbq_A_1", "lp_mean_stereotyped"] == raw_rows.loc["bbq_A_1", "lp_mean_third"]
    errors = analyses.label_errors(settings, options=StudyOptions(n_permutations=100)).set_index("setting")
    # bbq_A_1 fixed: stereotyped takes the stored third (logit(0.6) − 1 − 3 in score_row), anti takes the
    # stored stereotyped (logit(0.6) − 1), so its soft score is expit(−3); ss_1 is mirrored to 0.2.
    assert errors.loc["none", "english_soft"] == pytest.approx(np.mean([0.2, expit(-3.0), 0.7]))


def test_scores_by_text_follows_texts_not_roles():
    scored = table([record("m", "s1", "en", 0.8, texts=("ctx", "he is", "she is", "sky"))])
    swapped = scored.drop(columns=[c for c in scored.columns if c.startswith(("lp_", "ntok_")) or c == "model"])
    swapped[["stereotyped", "anti_stereotyped"]] = ["she is", "he is"]
    found, missing = pipeline.scores_by_text(swapped, scored)
    assert missing.empty and len(found) == 1
    assert analyses.item_scores(found)["soft"].iloc[0] == pytest.approx(0.2)
    changed = swapped.assign(third="moon")
    found, missing = pipeline.scores_by_text(changed, scored)
    assert found.empty and missing["item_id"].tolist() == ["s1/en"]


def test_rescore_subset_keeps_written_items_and_samples_sources():
    rows = []
    for i in range(3):
        rows += [record("m", f"w{i}", "en", 0.6), record("m", f"w{i}", "es", 0.6), record("m", f"w{i}", "sw", 0.6),
                 record("m", f"w{i}", "en", 0.6, variant="rewording", via="human-1"),
                 record("m", f"w{i}", "en", 0.6, variant="rewording", via="human-2")]
    for i in range(5):
        rows.append(record("m", f"s{i}", "en", 0.6, source="stereoset"))
    items = table(rows).drop(columns="model")
    subset = pipeline.rescore_subset(items, languages=["sw"], routes=["human-1"], per_category=2, seed=1)
    assert set(subset.loc[subset["source"] == "written", "language"]) == {"en", "sw"}
    assert set(subset["via"]) == {"human", "human-1"}
    assert (subset["source"] == "stereoset").sum() == 2
    again = pipeline.rescore_subset(items, languages=["sw"], routes=["human-1"], per_category=2, seed=1)
    assert again.equals(subset)
    assert (pipeline.rescore_subset(items, languages=[], routes=[], per_category=0)["source"] == "written").all()


def test_error_example_picks_the_item_that_moves_most():
    none = table([record("m", "s1", "en", 0.6, source="stereoset"), record("m", "s2", "en", 0.9, source="stereoset")])
    broken = table([record("m", "s1", "en", 0.4, source="stereoset"), record("m", "s2", "en", 0.1, source="stereoset")])
    stacked = pd.concat([none.assign(stereoset_label_map=False), broken.assign(stereoset_label_map=True)])
    example = analyses.error_example(stacked, "stereoset_label_map", source="stereoset")
    assert example["item_id"].unique().tolist() == ["s2/en"]
    assert example["setting"].tolist() == ["none", "stereoset_label_map"]
    assert example["choice"].tolist() == ["stereotyped", "anti-stereotyped"]
    assert analyses.error_example(stacked, "bbq_roles_by_order").empty
    with pytest.raises(ValueError, match="flag"):
        analyses.error_example(stacked, "typo")


def test_boundary_example_marks_the_unscored_first_token(tiny_lm):
    _, tokenizer = tiny_lm
    tokens = boundary_example(tokenizer, "The nurse said that", "she was tired.")
    joint = tokens.loc[tokens["scorer"] == "joint (correct)"]
    separate = tokens.loc[tokens["scorer"] == "separate (boundary error)"]
    assert joint.loc[joint["part"] == "continuation", "scored"].all()
    continuation = separate.loc[separate["part"] == "continuation"]
    assert not continuation["scored"].iloc[0] and continuation["scored"].iloc[1:].all()
    assert not joint.loc[joint["part"] == "context", "scored"].any()


@pytest.mark.filterwarnings("ignore::biasaudit.data.bbq.MissingCategoryWarning")
def test_rerun_with_errors_runs_the_real_pipeline(tiny_lm, tmp_path, monkeypatch):
    """Written items and the invented StereoSet/BBQ fixtures, scored by a tiny model saved to disk."""
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path / "runs"))
    network, tokenizer = tiny_lm
    model_dir = tmp_path / "tiny"
    network.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    from biasaudit.run import pipeline

    public, _ = pipeline.load_sources(["stereoset", "bbq"], data_dir=str(FIXTURES), stereoset_per_category=2,
                                      bbq_per_category=2)
    written = table([record("x", "w1", "en", 0.6, texts=("The nurse said that", "she was tired.", "he was tired.",
                                                          "the sky is green.")),
                     record("x", "w1", "es", 0.6, texts=("La enfermera dijo que", "ella estaba cansada.",
                                                          "él estaba cansado.", "el mango."))])
    items = pd.concat([written.drop(columns="model"), public], ignore_index=True)[list(public.columns)]
    reruns = pipeline.rerun_with_errors("t", items, models=[str(model_dir)], sources=["stereoset", "bbq"],
                                        data_dir=str(FIXTURES), stereoset_per_category=2, bbq_per_category=2)
    assert len(reruns) == 8 * len(items)
    stored = ScoreStore(tmp_path / "runs" / "t").read()
    assert sorted(stored.groupby("scorer_boundary").size()) == [len(items), len(items)]
    scored = analyses.item_scores(reruns).assign(
        **{flag: reruns[flag].to_numpy() for flag in analyses.ERROR_FLAGS}).set_index(
        ["stereoset_label_map", "bbq_roles_by_order", "scorer_boundary", "item_id"])["soft"]
    stereoset = public.loc[public["source"] == "stereoset", "item_id"]
    for item_id in stereoset:
        assert scored[(True, False, False, item_id)] == pytest.approx(1 - scored[(False, False, False, item_id)])
    assert scored[(False, False, True, "w1/en")] != pytest.approx(scored[(False, False, False, "w1/en")])
    assert scored[(True, True, False, "w1/en")] == scored[(False, False, False, "w1/en")], "errors 1 and 2 spare written items"
    table_ = analyses.label_errors(reruns, options=StudyOptions(n_permutations=100))
    assert len(table_) == 8


# --------------------------------------------------------------------------------------------
# One item in every language (chapter 21)
# --------------------------------------------------------------------------------------------


def test_case_study_picks_the_item_strong_in_every_model():
    rows = []
    for model, scores in (("m1", {"a": 0.95, "b": 0.8, "c": 0.99}), ("m2", {"a": 0.6, "b": 0.75, "c": 0.3})):
        for base, english in scores.items():
            rows += [record(model, base, "en", english), record(model, base, "de", english - 0.2)]
    scores = table(rows)
    assert analyses.pick_case(scores) == "b", "b leans at least 0.25 in both models; a only 0.1 in m2"
    case = analyses.case_study(scores)
    assert set(case["base_id"]) == {"b"} and len(case) == 4
    assert case["variant"].tolist()[:2] == ["original", "original"]
    german = case.loc[case["language"] == "de"].set_index("model")
    assert german["drop"].tolist() == pytest.approx([0.2, 0.2]), "English minus German, positive for a fall"
    assert german["choice"].tolist() == ["stereotyped", "stereotyped"], "0.6 and 0.55"
    assert german.loc["m1", "stereotyped"] == "b s de"
    chosen = analyses.case_study(scores, "c").set_index(["model", "language"])
    assert chosen.loc[("m2", "en"), "choice"] == "anti-stereotyped"
    with pytest.raises(KeyError, match="no item"):
        analyses.case_study(scores, "zzz")
    none_leans = table([record("m1", "a", "en", 0.3), record("m1", "a", "de", 0.3), record("m1", "b", "en", 0.45),
                        record("m1", "b", "de", 0.4)])
    assert analyses.pick_case(none_leans) == "a", "no item leans stereotyped: the strongest lean either way"


def _rewording_table(models_routes: dict[tuple[str, str], list[tuple[float, float]]]) -> pd.DataFrame:
    """English originals and one rewording route per key, from (soft English, soft reworded) pairs."""
    rows, seen = [], set()
    for (model, via), pairs in models_routes.items():
        for i, (english, reworded) in enumerate(pairs):
            if (model, i) not in seen:
                rows.append(score_row(model, f"b{i}", "en", english))
                seen.add((model, i))
            rows.append(score_row(model, f"b{i}", "en", reworded, variant="rewording", via=via))
    return pd.DataFrame(rows)


def test_paper_spike_in_on_one_cell_worked_by_hand():
    """With one null cell every run spikes it: the shift is the mean of sigmoid(logit(s) + δ) − s over its
    reworded items, and (8 items: the exact sign-flip test) the power is 1 when the exact p of the
    spiked changes is below alpha and 0 otherwise, worked out here by enumerating the 256 sign vectors."""
    import itertools

    english = [0.62, 0.55, 0.48, 0.71, 0.35, 0.66, 0.52, 0.58]
    reworded = [0.60, 0.57, 0.45, 0.72, 0.36, 0.63, 0.50, 0.59]
    table = _rewording_table({("m", "de"): list(zip(english, reworded))})
    deltas = [0.0, 0.2, 1.0]
    out = analyses.paper_spike_in(table, StudyOptions(seed=3), deltas=deltas, n_runs=5).set_index("delta")
    for delta in deltas:
        spiked = expit(logit(np.array(reworded)) + delta)
        assert out.loc[delta, "shift"] == pytest.approx(np.mean(spiked - reworded))
        changes = spiked - np.array(english)
        means = [abs(np.mean(changes * np.array(signs))) for signs in itertools.product([1, -1], repeat=8)]
        p = np.mean(np.array(means) >= abs(changes.mean()) - 1e-12)
        assert out.loc[delta, "power"] == (1.0 if p < 0.05 else 0.0)
    assert out.loc[0.0, "power"] == 0.0 and out.loc[1.0, "power"] == 1.0, "the case spans both outcomes"
    assert np.isnan(out.loc[0.0, "false_pos"]), "no other cell"


def test_paper_spike_in_draws_one_cell_per_run_and_tests_it_among_the_observed_ones():
    rng = np.random.default_rng(4)
    cells = {}
    for model in ("m1", "m2"):
        for via in ("de", "fi", "ja"):
            english = rng.uniform(0.3, 0.7, size=40)
            cells[(model, via)] = list(zip(english, np.clip(english + rng.normal(0, 0.02, size=40), 0.01, 0.99)))
    table = _rewording_table(cells)
    options = StudyOptions(seed=9, n_permutations=2000)
    out = analyses.paper_spike_in(table, options, deltas=[0.0, 0.3, 2.0], n_runs=30).set_index("delta")
    assert (out["n_cells"] == 6).all() and (out["n_runs"] == 30).all()
    assert out.loc[0.0, "shift"] == pytest.approx(0.0, abs=1e-15) and 0 < out.loc[0.3, "shift"] < out.loc[2.0, "shift"]
    assert out.loc[2.0, "power"] == 1.0 and out.loc[0.0, "power"] <= 0.1
    assert out.loc[2.0, "false_pos"] <= 0.05, "the other cells keep their observed (null) p-values"
    again = analyses.paper_spike_in(table.sample(frac=1.0, random_state=1), options, deltas=[0.0, 0.3, 2.0],
                                    n_runs=30).set_index("delta")
    pd.testing.assert_frame_equal(out, again)


def test_spike_in_comparison_uses_both_curves_monte_carlo_errors():
    mine = pd.DataFrame({"delta": [0.1, 0.2], "n_runs": 400, "shift": [0.0210, 0.0400], "shift_se": [0.0004, 0.0004],
                         "power": [0.30, 0.90], "power_se": [np.sqrt(0.3 * 0.7 / 400), np.sqrt(0.9 * 0.1 / 400)]})
    released = pd.DataFrame({"delta": [0.1, 0.2], "shift": [0.0200, 0.0401], "power": [0.10, 0.775]})
    book = pd.DataFrame({"detected": [0.4, 0.95]})
    table = analyses.detection.spike_in_comparison(mine, released, book).set_index("delta")
    # shift: |0.0210 − 0.0200| = 0.0010 against 2 × 0.0004 × √(1 + 400/40) = 0.00265: within
    assert table.loc[0.1, "shift_agrees"] and table.loc[0.2, "shift_agrees"]
    # power at 0.1: |0.30 − 0.10| = 0.20 against 2 × √(0.3·0.7/400 + 0.1·0.9/40) = 0.105: not within
    # power at 0.2: |0.90 − 0.775| = 0.125 against 2 × √(0.9·0.1/400 + 0.775·0.225/40) = 0.138: within
    assert not table.loc[0.1, "power_agrees"] and table.loc[0.2, "power_agrees"]
    assert table["power_book"].tolist() == [0.4, 0.95]


def test_released_label_settings_as_the_paper_ran_each_pipeline():
    raw = released_raw()
    fix = {"ss_1": {"stereotype": "anti_stereotype", "anti_stereotype": "stereotype", "unrelated": "unrelated"},
           "bbq_A_1": {"stereotype": "stereotype", "anti_stereotype": "anti_stereotype", "unrelated": "unrelated"},
           "bbq_A_2": None}
    settings = analyses.released_label_settings(raw, fix, same_items=False)
    bases = settings.groupby(["stereoset_label_map", "bbq_roles_by_order"])["base_id"].apply(set)
    # bbq_A_2's roles cannot be recovered: a pipeline that fixes BBQ drops it, one with error 2 scores it as stored.
    assert bases[(False, False)] == bases[(True, False)] == {"ss_1", "bbq_A_1", "gp_1"}
    assert bases[(False, True)] == bases[(True, True)] == {"ss_1", "bbq_A_1", "bbq_A_2", "gp_1"}
    only_labels = settings.loc[settings["stereoset_label_map"] & settings["bbq_roles_by_order"]].set_index("base_id")
    assert only_labels.loc["bbq_A_2", "lp_mean_stereotyped"] == raw.set_index("base_id").loc["bbq_A_2", "lp_mean_stereotyped"]
    errors = analyses.label_errors(settings, options=StudyOptions(n_permutations=100)).set_index("setting")
    # By hand: both errors on, the English items as stored: 0.8, 0.6, 0.9, 0.7; fixed: 0.2 (ss_1 mirrored), 0.6, 0.7.
    assert errors.loc["stereoset_label_map + bbq_roles_by_order", "english_soft"] == pytest.approx(0.75)
    assert errors.loc["none", "english_soft"] == pytest.approx(0.5)


def _length_case() -> pd.DataFrame:
    """Two models, English and Spanish versions of four items, with token counts: the rows `length_fit` and
    `length_matched` read."""
    rows = []
    for model, shift in (("a", 0.0), ("b", 0.3)):
        for k, (base, en_tokens, es_tokens, contrast) in enumerate((
                ("i1", (3, 3), (4, 4), 0.2), ("i2", (3, 4), (5, 5), -0.4),
                ("i3", (2, 2), (2, 2), 0.9), ("i4", (5, 3), (6, 2), 0.1))):
            translated = contrast * 0.5 + shift - k / 10
            for language, tokens, lp in (("en", en_tokens, contrast), ("es", es_tokens, translated)):
                rows.append({"model": model, "item_id": f"{base}/{language}", "base_id": base, "source": "written",
                             "dimension": "gender", "category": "trait", "language": language,
                             "variant": "original" if language == "en" else "translation",
                             "via": "human", "context": "c", "stereotyped": "s", "anti_stereotyped": "a", "third": "t",
                             "third_kind": "unrelated", "lp_mean_stereotyped": lp - 3.0, "lp_mean_anti_stereotyped": -3.0,
                             "lp_mean_third": -5.0, "ntok_stereotyped": tokens[0], "ntok_anti_stereotyped": tokens[1],
                             "lp_sum_stereotyped": (lp - 3.0) * tokens[0], "lp_sum_anti_stereotyped": -3.0 * tokens[1],
                             "lp_sum_third": -5.0, "ntok_third": 1})
    return pd.DataFrame(rows)


def test_the_papers_length_fit_against_a_least_squares_solve_by_hand():
    scores = _length_case()
    fit = analyses.length_fit(scores).set_index("language").loc["es"]
    # the design by hand: len_diff, len_diff_en, log(mean tokens / English mean), for the items in order, per model
    soft = 1 / (1 + np.exp(-(scores["lp_mean_stereotyped"] - scores["lp_mean_anti_stereotyped"]).to_numpy()))
    change = (soft[1::2] - soft[0::2])  # es minus en, row pairs
    X = np.array([[0, 0, np.log(4 / 3)], [0, -1, np.log(5 / 3.5)], [0, 0, 0.0], [4, 2, 0.0]] * 2, dtype=float)
    X = np.column_stack([np.ones(8), X])
    beta, *_ = np.linalg.lstsq(X, change, rcond=None)
    residual = change - X @ beta
    r2 = 1 - residual.var() / change.var()
    assert fit["n_pairs"] == 8 and fit["r2_length"] == pytest.approx(r2)
    assert fit["agreement_change"] == pytest.approx(np.corrcoef(change[:4], change[4:])[0, 1])
    assert fit["agreement_length"] == pytest.approx(np.corrcoef(residual[:4], residual[4:])[0, 1])
    matched = analyses.length_matched(scores).set_index("pairs")
    # equal length in Spanish and English: i1 (4/4, 3/3) and i3 (2/2, 2/2), for both models
    assert matched.loc["equal length", "n_pairs"] == 4 and matched.loc["all", "n_pairs"] == 8
    assert matched.loc["equal length", "drop"] == pytest.approx(-change[[0, 2, 4, 6]].mean())
    assert analyses.length_fit(scores.drop(columns=["ntok_stereotyped"])).empty, "no token counts, no fit"


# Word by word, as wordfreq splits them (lower case, on spaces): the two continuations of each item in English and
# in Spanish, for the fit with word frequencies.
_WORDS = {"i1": ((["the", "nurse"], ["the", "doctor"]), (["la", "enfermera"], ["el", "médico"])),
          "i2": ((["he", "cried"], ["she", "laughed"]), (["él", "lloró"], ["ella", "rió"])),
          "i3": ((["old", "man"], ["young", "woman"]), (["hombre", "viejo"], ["mujer", "joven"])),
          "i4": ((["poor"], ["rich", "family"]), (["pobre"], ["familia", "rica"]))}


def test_the_length_fit_with_word_frequencies_against_a_least_squares_solve_by_hand():
    import wordfreq

    scores = _length_case()
    # model b's tokenizer splits the Spanish continuations otherwise, so the two models' designs differ
    for base, tokens in (("i1", (5, 4)), ("i2", (5, 6)), ("i3", (3, 2)), ("i4", (6, 3))):
        row = (scores["model"] == "b") & (scores["item_id"] == f"{base}/es")
        scores.loc[row, ["ntok_stereotyped", "ntok_anti_stereotyped"]] = tokens
    for base, (english, spanish) in _WORDS.items():
        for language, (stereotyped, anti) in (("en", english), ("es", spanish)):
            row = scores["item_id"] == f"{base}/{language}"
            scores.loc[row, "stereotyped"], scores.loc[row, "anti_stereotyped"] = " ".join(stereotyped), " ".join(anti)
    fit = analyses.length_fit(scores).set_index("language").loc["es"]

    def zipf(words: list[str], language: str) -> float:
        return float(np.mean([wordfreq.zipf_frequency(w, language) for w in words]))

    frequency = {language: [zipf(pair[k][0], language) - zipf(pair[k][1], language) for pair in _WORDS.values()]
                 for k, language in ((0, "en"), (1, "es"))}
    soft = 1 / (1 + np.exp(-(scores["lp_mean_stereotyped"] - scores["lp_mean_anti_stereotyped"]).to_numpy()))
    change = soft[1::2] - soft[0::2]
    lengths = np.array([[0, 0, np.log(4 / 3)], [0, -1, np.log(5 / 3.5)], [0, 0, 0.0], [4, 2, 0.0],
                        [1, 0, np.log(4.5 / 3)], [-1, -1, np.log(5.5 / 3.5)], [1, 0, np.log(2.5 / 2)],
                        [3, 2, np.log(4.5 / 4)]])
    X = np.column_stack([np.ones(8), lengths, frequency["es"] * 2, frequency["en"] * 2])
    assert np.linalg.matrix_rank(X) == 6
    beta, *_ = np.linalg.lstsq(X, change, rcond=None)
    residual = change - X @ beta
    assert fit["n_pairs_frequency"] == 8
    assert fit["r2_length_frequency"] == pytest.approx(1 - residual.var() / change.var())
    assert fit["agreement_length_frequency"] == pytest.approx(np.corrcoef(residual[:4], residual[4:])[0, 1])
    # the paper's rule: frequencies only where they cover more than 90% of the pairs (here 6 of 8)
    scores.loc[scores["item_id"] == "i4/es", "anti_stereotyped"] = None
    assert np.isnan(analyses.length_fit(scores).set_index("language").loc["es", "r2_length_frequency"])
    assert np.isnan(analyses.length_fit(scores, frequency=False).loc[0, "r2_length_frequency"])


def test_the_translations_kept_for_table_6_by_hand():
    """Two models, three written items and a BBQ one, in English, Spanish and French: the drops and slopes with all
    translations, faithful ones, and faithful ones the model handles as fluently as English, worked by hand."""
    from scipy.special import expit

    contrast = {"w1": {"en": 1.0, "es": 0.5, "fr": 0.2}, "w2": {"en": -0.5, "es": -1.0, "fr": 0.0},
                "w3": {"en": 0.3, "es": 0.9, "fr": -0.4}, "q1": {"en": 0.8, "es": 0.3, "fr": 0.1}}
    # the logit of the fluency: 2 everywhere but where a version is set to 0 (fluency 0.5 against English's 0.88)
    clumsy = {("a", "w1/fr"), ("b", "w1/fr"), ("b", "w2/es")}
    rows = []
    for model in ("a", "b"):
        for base, by_language in contrast.items():
            for language, c in by_language.items():
                item = f"{base}/{language}"
                fluency_logit = 0.0 if (model, item) in clumsy else 2.0
                rows.append({"model": model, "item_id": item, "base_id": base,
                             "source": "bbq" if base == "q1" else "written", "dimension": "gender",
                             "category": "trait", "language": language,
                             "variant": "original" if language == "en" else "translation", "via": "human",
                             "context": "c", "stereotyped": "s", "anti_stereotyped": "a", "third": "t",
                             "third_kind": "unknown" if base == "q1" else "unrelated",
                             "lp_mean_stereotyped": -3.0 + c, "lp_mean_anti_stereotyped": -3.0,
                             "lp_mean_third": -3.0 + max(c, 0.0) - fluency_logit})
    scores = pd.DataFrame(rows)
    similarity = pd.DataFrame({"item_id": ["w1/es", "w2/es", "w3/es", "q1/es", "w1/fr", "w2/fr", "w3/fr", "q1/fr"],
                               "similarity": [0.95, 0.90, 0.91, 0.99, 0.80, 0.92, 0.93, 0.97]})
    kept = analyses.kept_translations(scores, similarity).set_index(["subset", "language"])

    def change(base: str, language: str) -> float:
        return expit(contrast[base][language]) - expit(contrast[base]["en"])

    def slope(pairs: list[tuple[str, str]]) -> float:
        x = [expit(contrast[base]["en"]) for base, _ in pairs]
        y = [expit(contrast[base][language]) for base, language in pairs]
        return np.polyfit(x, y, 1)[0]

    every = {"es": ["w1", "w2", "w3", "q1"], "fr": ["w1", "w2", "w3", "q1"]}
    faithful = {"es": ["w1", "w2", "w3", "q1"], "fr": ["w2", "w3", "q1"]}  # w1/fr at 0.80; 0.90 is faithful
    # equal fluency: no BBQ item; w1/fr is clumsy for both models, w2/es for model b
    fluent = {"es": ["w1", "w1", "w2", "w3", "w3"], "fr": ["w2", "w2", "w3", "w3"]}
    for subset, by_language, per_model in (("all", every, 2), ("faithful", faithful, 2),
                                           ("faithful, equal fluency", fluent, 1)):
        pairs = [(base, language) for language, bases in by_language.items() for base in bases for _ in
                 range(per_model)]
        drops = {}
        for language, bases in by_language.items():
            drops[language] = -np.mean([change(base, language) for base in bases])
            row = kept.loc[(subset, language)]
            assert row["n_pairs"] == len(bases) * per_model
            assert row["drop"] == pytest.approx(drops[language])
            assert row["slope"] == pytest.approx(slope([(b, language) for b in bases]))
        mean = kept.loc[(subset, "mean")]
        assert mean["n_pairs"] == len(pairs) and mean["drop"] == pytest.approx((drops["es"] + drops["fr"]) / 2)
        assert mean["slope"] == pytest.approx(slope(pairs))
    assert set(analyses.kept_translations(scores, None)["subset"]) == {"all"}, "no similarity table: all only"


def test_the_llm_rewordings_beside_the_routes_on_their_items_by_hand():
    """Table 3's second block: the LLM rewordings cover i1 and i2 of three items; the route de is summarised on
    those two only, per model (|mean change|, median |change|, SD) and then the median over the two models."""
    from scipy.special import expit

    from biasaudit.analyses.floor import separate_rewordings

    contrast = {"a": {"i1": (0.4, 0.1, 0.5), "i2": (-0.2, 0.3, -0.1), "i3": (1.0, -2.0, 0.0)},
                "b": {"i1": (0.0, -0.6, 0.2), "i2": (0.8, 0.2, 0.9), "i3": (0.5, 0.5, 0.0)}}  # en, via de, via llm

    def row(model: str, base: str, via: str, c: float) -> dict:
        return {"model": model, "item_id": f"{base}/en" + ("" if via == "original" else f"~{via}"), "base_id": base,
                "source": "written", "dimension": "gender", "category": "trait", "language": "en",
                "variant": "original" if via == "original" else "rewording", "via": "" if via == "original" else via,
                "context": "c", "stereotyped": "s", "anti_stereotyped": "a", "third": "t", "third_kind": "unrelated",
                "lp_mean_stereotyped": -3.0 + c, "lp_mean_anti_stereotyped": -3.0, "lp_mean_third": -6.0}

    scores = pd.DataFrame([row(m, base, via, c[k]) for m, items in contrast.items() for base, c in items.items()
                           for k, via in enumerate(("original", "de"))])
    llm = pd.DataFrame([row(m, base, "llm", c[2]) for m, items in contrast.items() for base, c in items.items()
                        if base != "i3"])
    table = separate_rewordings(scores, llm).set_index("via")
    assert list(table.index) == ["de", "llm"] and (table["n_items"] == 2).all()
    for k, via in ((1, "de"), (2, "llm")):
        changes = {m: np.array([expit(items[b][k]) - expit(items[b][0]) for b in ("i1", "i2")])
                   for m, items in contrast.items()}
        assert table.loc[via, "floor"] == pytest.approx(np.mean([abs(c.mean()) for c in changes.values()]))
        assert table.loc[via, "median_abs_d"] == pytest.approx(np.mean([np.median(abs(c)) for c in changes.values()]))
        assert table.loc[via, "sd_d"] == pytest.approx(np.mean([c.std(ddof=1) for c in changes.values()]))
        pooled = np.concatenate(list(changes.values())).std(ddof=1)
        assert table.loc[via, "sd_pooled"] == pytest.approx(pooled)
        assert table.loc[via, "noise_only_pooled"] == pytest.approx(pooled * np.sqrt(2 / (np.pi * 2)))
    assert separate_rewordings(scores, llm.iloc[:0]).empty
