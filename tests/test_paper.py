"""The paper's numbers beside a run's: the marks worked by hand, the rows a chapter builds, and (with the
data mirror) this project's numbers for Llama-3.1-8B against the paper's own per-model results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.book import paper
from biasaudit.core.options import StudyOptions
from biasaudit.data.released import read_released
from biasaudit.run.params import RunParams


def test_a_number_is_marked_the_same_within_monte_carlo_error_or_different():
    assert paper.Compared("drop", 0.0193, 0.01934, 4).mark() == "same at the paper's precision"
    assert paper.Compared("drop", 0.0193, 0.0196, 4).mark() == "differs"
    assert paper.Compared("power", 0.545, 0.53, 3, mc_se=0.04).mark() == "within Monte Carlo error (2 SE = 0.0800)"
    assert paper.Compared("cells", 28, 27, 0, why="a cell at the threshold").mark() == \
        "differs: a cell at the threshold"
    assert paper.Compared("sums", 0.6, math.nan, 3).mark() == "not computed by this run"


def test_the_summary_counts_the_marks():
    table = paper.beside([paper.Compared("a", 1.0, 1.0, 2), paper.Compared("b", 1.0, 1.2, 2, mc_se=0.2),
                          paper.Compared("c", 3, 2, 0, why="x")])
    assert table["paper"].tolist() == ["1.00", "1.00", "3"] and table["ours"].tolist() == ["1.00", "1.20", "2"]
    assert paper.summary_text(table) == ("The paper's own numbers beside this run's: of 3, 1 the same at the paper's "
                                         "printed precision, 1 within Monte Carlo error and 1 different (1 of them with "
                                         "the reason beside it).")
    table = paper.beside([paper.Compared("a", 1.0, 1.0, 2), paper.Compared("d", 0.93, math.nan, 2, why="no hub")])
    assert table["ours"].tolist() == ["1.00", "—"] and table["mark"].tolist()[1] == "not computed by this run: no hub"
    assert paper.summary_text(table) == ("The paper's own numbers beside this run's: of 2, 1 the same at the paper's "
                                         "printed precision, 1 not computed by this run and none different.")


def test_chapter_10_shares_its_english_scores_drops_and_reliable_cells_with_table_1():
    numbers = {"en_mean_ss": 0.5358, "en_binary_ss": 0.6315,
               "gap_by_language": {"zh-CN": {"mean_d": -0.0193, "lo": -0.0271, "hi": -0.0116, "n_sig": 3, "n_neg": 2,
                                             "n_sig_bin": 1}},
               "cells": {"n_sig_bh05": 2, "n_sig_bh05_binary": 1}}
    drops = pd.DataFrame({"language": ["en", "zh"], "soft": [0.53578, 0.5], "binary": [0.6316, 0.6],
                          "drop": [0.0, 0.0193], "drop_low": [0.0, 0.0116], "drop_high": [0.0, 0.0271]})
    cells = pd.DataFrame({"model": ["a", "b"], "language": ["zh", "zh"], "drop": [0.02, 0.01],
                          "reliable": [True, True], "reliable_binary": [True, False], "flips": [20_000, 1_000_000],
                          "flips_binary": [20_000, 20_000]})
    rows = {r.quantity: r for r in paper.drops_rows(numbers, drops, cells, 20_000)}
    assert rows["English soft score"].mark() == "same at the paper's precision"
    assert rows["English binary score"].mark() == "differs", "0.6316 is not 0.6315"
    assert rows["drop, zh"].paper == pytest.approx(0.0193) and rows["drop, zh"].mark().startswith("same")
    assert (rows["drop, zh: interval low"].paper, rows["drop, zh: interval high"].paper) == (0.0116, 0.0271)
    assert rows["reliable cells, zh"].mark() == ("differs: b × zh sits at the threshold; tested again here with "
                                                 "1,000,000 sign flips (the paper used 20,000)")
    assert rows["cells below English, zh"].mark() == "same at the paper's precision"
    assert rows["reliable cells, all"].ours == 2


def test_a_bootstrap_ends_monte_carlo_error_worked_by_hand():
    # [−0.0080, 0.0213] at 95%: SD (0.0293 / 3.92) = 0.007475; at B = 10,000 the 2.5% quantile's SE is
    # sqrt(0.025 × 0.975 / 10,000) / φ(1.96) × SD = 0.0015612 / 0.058445 × 0.0074746 = 0.00019967
    assert paper.percentile_se(-0.0080, 0.0213, 10_000) == pytest.approx(0.00019967, rel=1e-3)
    assert paper.percentile_se(-0.0080, 0.0213, 2_500) == pytest.approx(2 * 0.00019967, rel=1e-3)


def test_chapter_12_shares_each_models_gap_floor_and_interval_with_table_4():
    numbers = {"en_soft_by_model": {"m": 0.5335}, "en_bin_by_model": {"m": 0.6354}, "bootstrap": {"n_ci_above_0": 1}}
    per_model = pd.DataFrame({"model": ["m", "not-run"], "mean_dfg": [0.0173, 0.02], "floor": [0.0085, 0.01],
                              "diff": [0.0088, 0.01], "diff_lo": [-0.0080, 0.001], "diff_hi": [0.0213, 0.02]})
    gaps = pd.DataFrame({"model": ["m"], "english_soft": [0.53351], "english_binary": [0.6354], "gap": [0.01731],
                         "floor": [0.0085], "gap_minus_floor": [0.00881], "low": [-0.0083], "high": [0.0215]})
    rows = {r.quantity: r for r in paper.gap_rows(numbers, per_model, gaps, 5_000)}
    assert not any(q.startswith("not-run") for q in rows), "a model this run lacks is not listed"
    assert all(rows[f"m: {q}"].mark().startswith("same") for q in
               ("English soft score", "English binary score", "gap", "floor", "gap − floor"))
    # the low end: 0.0003 apart; 2 SE = 2 × hypot(SE at 5,000 of [−0.0083, 0.0215], SE at 10,000 of the paper's)
    se = math.hypot(paper.percentile_se(-0.0083, 0.0215, 5_000), paper.percentile_se(-0.0080, 0.0213, 10_000))
    assert rows["m: gap − floor, interval low"].mc_se == pytest.approx(se) and 0.0003 < 2 * se
    assert rows["m: gap − floor, interval low"].mark().startswith("within Monte Carlo error")
    assert rows["models whose gap − floor interval lies above zero"].mark() == "differs", "none lies above zero here"


def test_only_a_released_run_of_the_ten_models_is_compared(tmp_path):
    assert paper.paper_files(RunParams(), ["smollm2-135m"]) is None
    fixtures = Path(__file__).parent / "fixtures" / "released"
    assert paper.paper_files(RunParams(released_scores=str(fixtures)), ["tiny-a"]) is None


@pytest.mark.mirror("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv", "label_fix.json",
                    "paper_numbers.json", "bootstrap_dfg_minus_floor.csv")
def test_llamas_own_numbers_are_the_papers(mirror):
    """The paper gives some numbers per model: Llama-3.1-8B's, from its released scores alone, are the paper's
    (the English binary score counts a tie as not stereotyped, as the paper does)."""
    numbers = json.loads((mirror / "paper_numbers.json").read_text())
    scores = read_released(mirror, models=["llama3.1-8b"])
    english = analyses.item_scores(scores).query("variant == 'original'")
    assert english["soft"].mean() == pytest.approx(numbers["en_soft_by_model"]["llama3.1-8b"], abs=5e-5)
    assert english["binary"].mean() == pytest.approx(numbers["en_bin_by_model"]["llama3.1-8b"], abs=5e-5)
    gaps = analyses.model_gaps(scores, options=StudyOptions(n_permutations=200, n_bootstrap=2_000))
    assert gaps.set_index("model").loc["llama3.1-8b", "clci"] == pytest.approx(numbers["clfi"]["llama3.1-8b"], abs=5e-5)
    # Table 4's row: English scores, gap, floor and gap − floor the same at four decimals; the interval's ends
    # within Monte Carlo error of the paper's
    per_model = pd.read_csv(mirror / "bootstrap_dfg_minus_floor.csv")
    rows = paper.gap_rows(numbers, per_model, gaps, 2_000)
    assert len(rows) == 7 + 1 and all(r.mark().startswith(("same", "within")) for r in rows[:7]), \
        [(r.quantity, r.paper, r.ours, r.mark()) for r in rows]


def test_chapter_14_shares_each_sources_counts_and_carry_over_with_table_9():
    review = {"by_source": {"StereoSet": {"items": 200, "cells_negative": 69, "reliable": 41, "reliable_binary": 18,
                                          "slope_tr": 0.1527, "slope_rw": 0.49, "agree_tr": 0.5637, "agree_rw": 0.668},
                            "BBQ+Written": {"items": 162, "cells_negative": 52, "reliable": 0, "reliable_binary": 1,
                                            "slope_tr": 0.30, "slope_rw": 0.71, "agree_tr": 0.61, "agree_rw": 0.74}}}
    table = pd.DataFrame({"source": ["stereoset", "bbq"], "n_items": [200, 125], "cells_below_english": [69, 51],
                          "reliable_drops": [40, 0], "reliable_rises": [1, 0], "reliable_binary": [18, 0],
                          "slope_translation": [0.1534, 0.3], "slope_rewording": [0.494, 0.7],
                          "same_choice_translation": [0.5641, 0.6], "same_choice_rewording": [0.6671, 0.7]})
    rows = {r.quantity: r for r in paper.source_rows(review, table)}
    assert len(rows) == 8, "BBQ + written is not in this run's table; BBQ is not among the paper's rows"
    assert rows["StereoSet: reliable cells"].ours == 41, "a reliable rise counts as the paper's reliable cell too"
    assert all(r.mark().startswith("same") for q, r in rows.items() if q != "StereoSet: same choice, rewording")
    assert rows["StereoSet: same choice, rewording"].mark() == "differs", "0.668 is not 0.667"


def test_chapter_16_counts_each_languages_contrast_judgments_as_the_paper():
    quality = {"judgments": {"by_lang": {"zh-CN": {"lost": 1, "partly": 1, "preserved": 2}},
                             "total": {"preserved": 2, "partly": 1, "lost": 1}}}
    judgments = pd.DataFrame({"language": ["zh", "zh", "zh", "zh", "sw"],
                              "judgment": ["preserved", "preserved", "partly", "partly", "lost"]})
    rows = {r.quantity: (r.paper, r.ours) for r in paper.judgment_rows(quality, judgments)}
    assert rows == {"contrast preserved, zh": (2, 2), "contrast partly, zh": (1, 2), "contrast lost, zh": (1, 0),
                    "contrast preserved, all": (2, 2), "contrast partly, all": (1, 2), "contrast lost, all": (1, 1)}
    assert paper.judgment_rows(quality, None) == [] and paper.judgment_rows({}, judgments) == []


@pytest.mark.mirror("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv", "label_fix.json",
                    "contrast_judgment_full.csv", "translation_quality.json")
def test_the_contrast_judgments_a_released_run_reads_are_the_papers(mirror, tmp_path, monkeypatch):
    """The judgments as imported with the released scores (the versions the paper keeps): each language's
    preserved, partly and lost counts are the paper's own (translation_quality.json)."""
    from biasaudit.data.release_import import import_released
    from biasaudit.run.pipeline import read_judgments

    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path / "runs"))
    import_released("released", mirror, models=["llama3.1-8b"])
    judgments = read_judgments(RunParams(run_name="released"))
    rows = paper.judgment_rows(json.loads((mirror / "translation_quality.json").read_text()), judgments)
    assert len(rows) == 7 * 3 + 3 and len(judgments) == 2497
    assert all(r.mark().startswith("same") for r in rows), [(r.quantity, r.paper, r.ours) for r in rows]


def test_chapter_16_sets_each_subsets_item_level_test_beside_table_10():
    theirs = {"items": 266, "drop": 0.0012, "beyond": 0.0013, "lo": -0.0164, "hi": 0.0196, "p": 0.01, "q": 0.02}
    quality = {"item_level": {"preserved": {"zh-CN": theirs}, "not_lost": {"es": theirs}}}
    tests = pd.DataFrame({"subset": ["contrast preserved", "all items"], "language": ["zh", "es"],
                          "n_items": [266, 349], "translation_drop": [0.00124, 0.0066], "excess_drop": [0.0013, 0.006],
                          "low": [-0.0170, -0.01], "high": [0.0197, 0.02], "p": [0.0115, 0.4], "q": [0.025, 0.4]})
    rows = {r.quantity: r for r in paper.item_level_rows(quality, tests, 20_000, 10_000)}
    assert {q.split(":")[0] for q in rows} == {"contrast preserved, zh"}, "es's subset is not in this run's tests"
    assert all(rows[f"contrast preserved, zh: {q}"].mark().startswith("same") for q in ("items", "drop",
                                                                                        "beyond rewording"))
    # two sets of 20,000 sign flips at p = 0.01: SE = sqrt(0.01 × 0.99 × 2 / 20,000) = 0.000995; 0.0015 apart is
    # within 2 SE; q's SE is scaled by q / p = 2, and 0.005 apart is beyond 2 × 0.00199
    assert rows["contrast preserved, zh: p"].mc_se == pytest.approx(0.000995, rel=1e-3)
    assert rows["contrast preserved, zh: p"].mark().startswith("within Monte Carlo error")
    assert rows["contrast preserved, zh: q"].mark() == "differs"
    assert rows["contrast preserved, zh: beyond rewording, interval low"].mark().startswith("within")


def test_chapter_13_sets_r_with_its_interval_and_the_sd_ratio_beside_table_12():
    carried = {"r": 0.3053, "r_lo": 0.2282, "r_hi": 0.3817, "sd_ratio": 1.2150, "slope": 0.3709, "slope_lo": 0.2834,
               "slope_hi": 0.4635, "n_items": 349}
    table = pd.DataFrame({"change": ["translation", "rewording", "translation"], "group": ["es", "de", "all"],
                          "n_items": [349, 361, 362], "r": [0.3051, 0.6267, 0.2326], "r_low": [0.2290, 0.56, 0.2],
                          "r_high": [0.3805, 0.68, 0.27], "sd_ratio": [1.2149, 1.18, 1.13], "slope": [0.3694, 0.74, 0.26],
                          "slope_low": [0.2810, 0.6, 0.2], "slope_high": [0.4630, 0.8, 0.3]})
    rows = {r.quantity: r for r in paper.association_rows(
        {"lang_es": carried, "pivot_de": {**carried, "r": 0.6267}, "lang_zh-CN": carried, "same_choice": {}}, table,
        5_000)}
    assert sorted({q.split(":")[0] for q in rows}) == ["rewording, de", "translation, es"]
    assert rows["translation, es: r"].mark() == "same at the paper's precision", "0.3051 and 0.3053 both print .31"
    assert "translation, es: slope" not in rows, "the slope is chapter 13's other comparison (carry_rows)"
    assert rows["translation, es: slope, interval high"].mark() == "same at the paper's precision"
    preserved = {r.quantity: r for r in paper.association_rows({"pooled": carried, "es": carried}, table, 5_000,
                                                                 subset="contrast preserved")}
    assert preserved["contrast preserved, translation, all: items"].mark() == "differs", "362 against 349"
    assert preserved["contrast preserved, translation, es: slope"].mark() == "same at the paper's precision"


def test_chapter_15_sets_each_dimension_beside_table_13():
    results = {"by_dimension": {"Race/ethnicity": {"items": 82, "drop": 0.0128, "lo": -0.0101, "hi": 0.0362,
                                                   "r_tr": 0.2663, "r_rw": 0.5317, "reversed": 0.2126},
                                "Caste": {"items": 3, "drop": 0.1, "lo": 0, "hi": 0.2, "r_tr": 0, "r_rw": 0,
                                          "reversed": 0}},
               "fate": {"translated": {"n": 11264, "reversed": 0.2292}}}
    table = pd.DataFrame({"dimension": ["race", "all"], "n_items": [82, 362], "drop": [0.0133, 0.02],
                          "drop_low": [-0.0101, 0.0], "drop_high": [0.0362, 0.04], "r_translation": [0.27, 0.2],
                          "r_rewording": [0.5317, 0.5], "reversal_share": [0.2141, 0.2292], "n_leaning": [3000, 11264]})
    rows = {r.quantity: r for r in paper.dimension_rows(results, table, 5_000)}
    assert not any(q.startswith("caste") for q in rows), "a dimension this run lacks is not listed"
    # printed as .013 and 21%: 0.0133 and 0.2141 print the same
    assert all(r.mark().startswith("same") for r in rows.values()), [(q, r.mark()) for q, r in rows.items()]
    assert rows["all dimensions: leaning pairs"].ours == 11264 and len(rows) == 7 + 2


@pytest.mark.mirror("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv", "label_fix.json",
                    "contrast_judgment_full.csv", "translation_quality.json", "association_and_dimensions.json")
def test_the_subsets_of_tables_10_12_and_13_hold_the_papers_items(mirror):
    """Which items each subset holds does not depend on the models: from Llama-3.1-8B's scores alone, every item
    count of the paper's Tables 10 (all, contrast preserved, not lost), 12 (per language and route, and preserved)
    and 13 (per dimension) is the paper's own."""
    from biasaudit.data.release_inputs import read_contrast_judgments

    scores = read_released(mirror, models=["llama3.1-8b"])
    judgments = read_contrast_judgments(mirror / "contrast_judgment_full.csv")
    options = StudyOptions(n_permutations=100, n_bootstrap=50)
    quality = json.loads((mirror / "translation_quality.json").read_text())
    results = json.loads((mirror / "association_and_dimensions.json").read_text())
    pairs = analyses.carry_over_pairs(scores)
    preserved = analyses.translations_kept(pairs, analyses.judged_versions(scores, judgments, ("preserved",)))
    rows = (paper.item_level_rows(quality, analyses.against_rewording(scores, None, options, judgments=judgments),
                                  100, 50)
            + paper.association_rows(results["association"], analyses.carry_over_table(scores, options, pairs=pairs),
                                     50)
            + paper.association_rows(quality["association"]["preserved"],
                                     analyses.carry_over_table(scores, options, pairs=preserved), 50,
                                     subset="contrast preserved")
            + paper.dimension_rows(results, analyses.by_dimension(scores, options), 50))
    counts = [r for r in rows if r.quantity.endswith(": items")]
    assert len(counts) == 3 * 7 + (2 + 7 + 3) + (1 + 7) + 6
    assert all(r.mark().startswith("same") for r in counts), [(r.quantity, r.paper, r.ours) for r in counts]


def test_chapter_16_sets_the_kept_translations_beside_table_6():
    review = {"faithful": {"reduction": 0.0039, "reduction_ci": [-0.0019, 0.0098]}}
    faithful = pd.DataFrame({"language": ["zh", "mean"], "reduction": [0.0077, 0.0039],
                             "reduction_low": [0.0, -0.0020], "reduction_high": [0.01, 0.0097]})
    rows = {r.quantity: r for r in paper.faithful_rows(review, faithful, 5_000)}
    assert list(rows) == ["reduction", "reduction, interval low", "reduction, interval high"]
    assert rows["reduction"].mark().startswith("same")
    assert paper.faithful_rows(review, faithful.iloc[:0], 5_000) == [], "without a similarity table, nothing"
    robustness = {"filters": {
        "all": {"n": 24970, "drop_by_lang": {"zh-CN": 0.0193, "es": 0.0066}, "drop_equal_weight": 0.0209,
                "slope_pooled": 0.2635},
        "faithful_fluent_nobbq": {"n": 3425, "drop_by_lang": {"zh-CN": 0.0085, "es": 0.0135},
                                  "drop_equal_weight": 0.0172, "slope_pooled": 0.2518}}}
    kept = pd.DataFrame({"subset": ["all", "all", "faithful, equal fluency", "faithful, equal fluency"],
                         "language": ["zh", "mean", "zh", "mean"], "n_pairs": [3610, 3610, 500, 500],
                         "drop": [0.01934, 0.0216, 0.0084, 0.0084], "slope": [0.26, 0.2641, 0.2, 0.2]})
    rows = {r.quantity: r for r in paper.kept_rows(robustness, kept)}
    assert "all: drop, es" not in rows, "a language this run lacks is not listed"
    assert len(rows) == 2 * 4
    assert rows["all: drop, zh"].mark().startswith("same"), "0.0193 and 0.01934 both print 0.019"
    assert rows["all: drop, languages weighted equally"].mark() == "differs", "0.0209 prints 0.021, 0.0216 0.022"
    assert rows["faithful, equal fluency: slope"].mark() == "differs", "0.25 against 0.20"
    assert (rows["all: pairs"].ours, rows["faithful, equal fluency: pairs"].ours) == (3610, 500)
    assert paper.kept_rows(robustness, kept.iloc[:0]) == []


def test_chapter_11_sets_its_rewordings_beside_table_3():
    numbers = {"fidelity": {"share_identical_by_pivot": {"de": 0.2772, "fi": 0.1602, "ja": 0.0893},
                            "cos_by_pivot_field_mean": {"de": {"anti_stereotype": 0.9415, "context": 0.9182,
                                                               "stereotype": 0.9444}}},
               "extra_pivot": {"de": {"floor": 0.03016, "median_abs_d": 0.06924, "sd_d": 0.16182},
                               "llm": {"floor": 0.00498, "median_abs_d": 0.03499, "sd_d": 0.0851}}}
    floor = pd.DataFrame({"via": ["de"], "floor": [0.002], "reliable_cells": [0]})
    same = pd.DataFrame({"pivot": ["de", "fi"], "n_fields": [1086, 1086], "share_unchanged": [0.2801, 0.1702]})
    subset = pd.DataFrame({"via": ["de", "llm"], "n_items": [92, 92], "floor": [0.0304, 0.0064],
                           "median_abs_d": [0.06924, 0.0350], "sd_d": [0.1618, 0.0851]})
    similarity = pd.DataFrame({"pivot": ["de"], "field": ["all"], "n_fields": [1086], "similarity": [0.9251]})
    subset = subset.assign(sd_pooled=[0.1, 0.0970], noise_only_pooled=[0.01, 0.0083])
    llm_floor = {"sd": 0.09704, "n_items": 92, "expected": 0.008072, "observed_median": 0.00498}
    rows = {r.quantity: r for r in paper.floor_rows(numbers, floor, subset, same, similarity, "", llm_floor)}
    assert [rows[f"LLM rewordings: {q}"].mark()[:4] for q in ("items", "SD of the changes, all pairs",
                                                              "noise-only value")] == ["same", "same", "diff"]
    # the paper prints the mean of its three fields' similarities: 0.9347 → 0.93, as 0.9251 → 0.93
    assert rows["similarity to the original, via de"].mark().startswith("same")
    # printed as whole percents: 28% and 28%, 16% and 17%; ja has no count here
    assert rows["fields returned unchanged, via de (the paper's count)"].mark().startswith("same")
    assert rows["fields returned unchanged, via fi (the paper's count)"].mark() == "differs"
    assert rows["via de, on the LLM rewordings' items: floor (median over models)"].mark().startswith("same")
    assert rows["LLM rewordings: floor (median over models)"].mark() == "differs", "0.005 against 0.006"
    assert len(rows) == 1 + 2 + 2 * 3 + 3
    rows = paper.floor_rows(numbers, floor, subset.iloc[:0], None, None, "needs the hub")
    assert [(r.quantity, r.mark()) for r in rows] == [("similarity to the original, via de",
                                                       "not computed by this run: needs the hub")]


def test_a_long_comparison_is_folded_under_its_summary():
    short = paper.block([paper.Compared("a", 1.0, 1.0, 2)], "x.json").data
    long = paper.block([paper.Compared(f"n{i}", 1.0, 1.0, 2) for i in range(paper.FOLD_ROWS + 1)], "x.json").data
    assert "<details>" not in short and "of 1, 1 the same" in short
    assert f"<details><summary>All {paper.FOLD_ROWS + 1} numbers, one per row</summary>" in long
    assert long.index("The paper beside this run") < long.index("<details>"), "the summary stays in view"


def test_chapter_13_sets_the_within_language_rewordings_beside_table_15():
    review = {"within_language": {"hi": {"pairs": 1290, "items": 129, "slope_within": 0.8350, "agree_within": 0.8287,
                                         "corr_within": 0.8368, "slope_cross_same_items": 0.1615,
                                         "slope_en_rewording_same_items": 0.6852},
                                  "es": {"pairs": 1010, "items": 101, "slope_within": 0.82, "agree_within": 0.81,
                                         "corr_within": 0.82, "slope_cross_same_items": 0.46,
                                         "slope_en_rewording_same_items": 0.75}}}
    same = pd.DataFrame({"language": ["hi"], "n_items": [129], "n_pairs": [1290], "slope_within": [0.8349],
                         "r_within": [0.8368], "same_choice_within": [0.8287], "slope_translation": [0.1652],
                         "slope_rewording": [0.6852]})
    rows = {r.quantity: r for r in paper.within_rows(review, same)}
    assert len(rows) == 7, "Spanish is not reworded in this run"
    assert rows["within hi: slope, English to hi, same items"].mark() == "differs", "0.16 against 0.17"
    assert all(r.mark().startswith("same") for q, r in rows.items() if "English to" not in q)


def test_chapter_18_sets_the_length_fit_beside_table_11():
    review = {"surface": {"zh-CN": {"agree_raw": 0.3816, "agree_len": 0.3780, "r2_len": 0.1136}},
              "length_matched": {"pairs": 4778, "drop": 0.0237, "slope": 0.3349, "drop_all": 0.0209,
                                 "slope_all": 0.2635}}
    fit = pd.DataFrame({"language": ["zh"], "n_pairs": [3610], "agreement_change": [0.3816],
                        "agreement_length": [0.3869], "r2_length": [0.1136]})
    matched = pd.DataFrame({"pairs": ["equal length", "all"], "n_pairs": [4778, 24970], "drop": [0.0237, 0.0209],
                            "slope": [0.3349, 0.2635]})
    rows = {r.quantity: r for r in paper.surface_rows(review, fit, matched)}
    assert len(rows) == 3 + 5, "the paper has no word frequencies here: no rows for them"
    assert rows["models agree on the change, lengths removed, zh"].mark() == "differs", "0.38 against 0.39"
    assert all(r.mark().startswith("same") for q, r in rows.items() if "lengths removed" not in q)
    assert paper.surface_rows(review, fit.iloc[:0], matched.iloc[:0]) == []
    review["surface"]["zh-CN"].update(agree_len_freq=0.3744, r2_len_freq=0.1222)
    fit = fit.assign(agreement_length_frequency=[0.3741], r2_length_frequency=[0.1231])
    rows = {r.quantity: r for r in paper.surface_rows(review, fit, matched)}
    assert rows["models agree on the change, lengths and frequencies removed, zh"].mark().startswith("same")
    assert rows["R² of lengths and frequencies, zh"].mark() == "differs", "0.122 against 0.123"
    rows = paper.surface_rows(review, fit.assign(r2_length_frequency=[float("nan")]), matched)
    assert [r.mark() for r in rows if r.quantity.startswith("R² of lengths and")] == ["not computed by this run"]


@pytest.mark.mirror("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv", "label_fix.json",
                    "token_counts.csv", "review2_checks.json")
def test_the_equal_length_pairs_are_the_papers(mirror):
    """Which translation pairs have continuations of equal length depends on the models' token counts, which the
    release gives for all ten: with Llama-3.1-8B's versions given each model's counts, the equal-length pairs are
    the paper's 4,778 (Table 11's last row) of 24,970."""
    from biasaudit.data.release_inputs import read_token_counts, with_token_counts

    scores = read_released(mirror, models=["llama3.1-8b"])
    counts = read_token_counts(mirror / "token_counts.csv")
    every = pd.concat([scores.assign(model=model) for model in counts["model"].unique()], ignore_index=True)
    matched = analyses.length_matched(with_token_counts(every, counts)).set_index("pairs")["n_pairs"]
    published = json.loads((mirror / "review2_checks.json").read_text())["length_matched"]["pairs"]
    assert (matched["equal length"], matched["all"]) == (published, 24970) == (4778, 24970)


@pytest.mark.mirror("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv",
                    "llama3.1-8b_noise_floor_llm.csv", "label_fix.json", "robustness_checks.json")
def test_the_llm_rewordings_cover_the_papers_92_items(mirror):
    """Table 3's second block: the release's LLM rewordings, labels fixed, cover the paper's 92 items, and every
    route is summarised on those same items."""
    from biasaudit.analyses.floor import separate_rewordings
    from biasaudit.data.release_import import read_llm_rewordings

    table = separate_rewordings(read_released(mirror, models=["llama3.1-8b"]),
                                read_llm_rewordings(mirror, models=["llama3.1-8b"])).set_index("via")
    published = json.loads((mirror / "robustness_checks.json").read_text())["llm_floor"]["n_items"]
    assert list(table.index) == ["de", "fi", "ja", "llm"]
    assert table.loc["llm", "n_items"] == published == 92 and (table["n_items"] <= 92).all()


@pytest.mark.mirror("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv", "label_fix.json",
                    "prompts.json", "token_counts.csv", "review2_checks.json")
def test_word_frequencies_enter_the_length_fit_in_the_papers_languages(mirror):
    """The paper adds word frequencies to Table 11's fit for Spanish, French, Chinese, Arabic and Hindi, not for
    Korean or Swahili: so does the fit on the released texts (wordfreq has no Swahili list; Korean needs MeCab)."""
    from biasaudit.data.release_inputs import read_token_counts, with_token_counts

    scores = with_token_counts(read_released(mirror, models=["llama3.1-8b"]),
                               read_token_counts(mirror / "token_counts.csv"))
    fit = analyses.length_fit(scores).set_index("language")
    surface = json.loads((mirror / "review2_checks.json").read_text())["surface"]
    papers = {code.split("-")[0] for code, row in surface.items() if "agree_len_freq" in row}
    assert set(fit.index[fit["r2_length_frequency"].notna()]) == papers == {"es", "fr", "zh", "ar", "hi"}
