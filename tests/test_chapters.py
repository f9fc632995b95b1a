"""The sentences chapters quote are computed, and branch, in the library: each branch on a table
built by hand, with the sentence a reader should see."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.book.chapters import (
    agreement,
    carry_over,
    case_study,
    dimensions,
    faithful,
    items,
    label_errors,
    reliability,
    score,
    sources,
    translate,
)
from biasaudit.run.params import RunParams


def source_rows(**by_source) -> pd.DataFrame:
    rows = []
    for source, (items, translated, soft) in by_source.items():
        rows.append({"source": source, "n_items": items, "n_translated": translated, "english_soft": soft,
                     "n_cells": 2 if translated else 0, "reliable_drops": 1 if translated else 0, "reliable_rises": 0,
                     "drop": 0.05 if translated else np.nan, "drop_low": 0.01, "drop_high": 0.09,
                     "n_pairs_translation": 4 * translated, "slope_translation": 0.2, "slope_rewording": 0.6,
                     "same_choice_translation": 0.5, "same_choice_rewording": 0.8})
    return pd.DataFrame(rows)


def test_sources_text_by_what_the_run_has():
    only_written = source_rows(written=(64, 64, 0.547))
    assert sources.sources_text(only_written).startswith("This run has one source only: the written items (64 English")
    english_only = source_rows(stereoset=(200, 0, 0.6), bbq=(120, 0, 0.5), written=(64, 64, 0.547))
    text = sources.sources_text(english_only)
    assert "StereoSet and BBQ are in English only here" in text
    assert text.endswith("0.600 for StereoSet, 0.500 for BBQ and 0.547 for the written items.")
    assert "no source has translations" in sources.reliable_text(source_rows(stereoset=(200, 0, 0.6)))
    assert sources.reliable_text(only_written) == "written: 1 of 2 cells show a reliable drop"


def test_dimension_sentences():
    table = pd.DataFrame({"dimension": ["age", "race", "gender"], "drop": [0.10, -0.02, 0.03],
                          "drop_low": [0.02, -0.08, -0.01], "drop_high": [0.18, 0.04, 0.07],
                          "reversal_share": [0.5, 0.1, np.nan], "n_leaning": [10, 20, 0]})
    text = dimensions.drop_text(table)
    assert text.startswith("The drop is largest for age (0.100") and "smallest for race (-0.020" in text
    assert text.endswith("The interval lies wholly above zero for age.")
    assert dimensions.reversal_text(table) == ("Reversals are most common for age (50% of 10 leaning pairs) and least "
                                               "common for race (10% of 20).")
    assert "too few" in dimensions.reversal_text(table.iloc[[2]])
    assert dimensions.drop_text(table.iloc[0:0]) == "This run has no translated items, so no dimension has a drop."


def test_where_a_neutral_item_lands():
    assert agreement.center_text(0.51).startswith("close to 0.5")
    assert agreement.center_text(0.45).startswith("below 0.5: translation pushes items") and "anti-stereotyped" in \
        agreement.center_text(0.45)
    assert agreement.center_text(0.56).startswith("above 0.5") and "towards the stereotyped side" in \
        agreement.center_text(0.56)
    support = pd.DataFrame({"language": ["es", "sw"], "available": [True, False], "note": ["", "no word list"]})
    assert agreement.frequency_text(support, True) == ("Not covered: Swahili (sw): no word list. In those languages the "
                                                       "regression uses the other properties only.")
    assert agreement.frequency_text(support, False).startswith("Word frequencies are switched off")


def test_faithful_subsets_that_are_left_out_are_named():
    tests = pd.DataFrame({"subset": ["all items"]})
    text = faithful.subsets_text(tests, None, 0.9)
    assert "needs the similarity table" in text and "without StereoSet is left out" in text
    text = faithful.subsets_text(tests, pd.DataFrame({"item_id": []}), 0.9)
    assert "no item is translated faithfully into every language at the threshold 0.90" in text
    full = pd.DataFrame({"subset": ["all items", "faithful in every language", "without StereoSet"]})
    assert faithful.subsets_text(full, pd.DataFrame(), 0.9) == ""


def test_within_language_carry_over_is_said_only_where_the_run_has_it():
    table = pd.DataFrame({"change": ["rewording"], "group": ["human-1"], "slope": [0.6]})
    none = analyses.within_language_same_items(pd.DataFrame(columns=["change", "group", "base_id"]))
    assert carry_over.within_language_text(table, table.iloc[0], none).startswith(
        "This run has no rewordings of translated")
    within = pd.DataFrame({"change": ["within-language rewording"] * 3, "group": ["es", "hi", "all"],
                           "slope": [0.5, 0.3, 0.4], "slope_low": [0.1] * 3, "slope_high": [0.7] * 3,
                           "r": [0.5] * 3, "same_choice": [0.75] * 3})
    text = carry_over.within_language_text(pd.concat([table, within]), table.iloc[0], none)
    assert text.startswith("This run has rewordings within Spanish (es) and Hindi (hi). Rewording within a language "
                           "keeps a slope of 0.40")
    assert text.endswith("against 0.60 for rewording English.")
    same = pd.DataFrame({"language": ["hi"], "n_items": [129], "slope_within": [0.83], "slope_translation": [0.16],
                         "slope_rewording": [0.69]})
    assert carry_over.within_language_text(pd.concat([table, within]), table.iloc[0], same).endswith(
        "On the same items, the slopes are: Hindi (hi), 129 items: 0.83 reworded within the language, 0.16 translated "
        "from English, 0.69 reworded in English.")


def test_the_same_items_carry_over_by_hand():
    """Hindi items a and b reworded within Hindi: (0.45, 0.55), (0.65, 0.75), slope 1; translated from English on the
    same items (c, not reworded in Hindi, left out): (0.5, 0.45), (0.7, 0.55), slope 0.5; reworded in English:
    (0.5, 0.52), (0.7, 0.67), slope 0.75."""
    rows = [("within-language rewording", "hi", "a", 0.45, 0.55), ("within-language rewording", "hi", "b", 0.65, 0.75),
            ("translation", "hi", "a", 0.5, 0.45), ("translation", "hi", "b", 0.7, 0.55),
            ("translation", "hi", "c", 0.9, 0.1), ("translation", "es", "a", 0.5, 0.9),
            ("rewording", "de", "a", 0.5, 0.52), ("rewording", "de", "b", 0.7, 0.67)]
    pairs = pd.DataFrame(rows, columns=["change", "group", "base_id", "before", "after"]).assign(model="m")
    pairs["binary_before"], pairs["binary_after"] = pairs["before"] > 0.5, pairs["after"] > 0.5
    same = analyses.within_language_same_items(pairs).set_index("language").loc["hi"]
    assert (same["n_items"], same["n_pairs"]) == (2, 2)
    assert same[["slope_within", "r_within", "slope_translation", "slope_rewording"]].tolist() == pytest.approx(
        [1.0, 1.0, 0.5, 0.75])
    assert same["same_choice_within"] == 0.5, "a crosses 0.5 (0.45 -> 0.55); b stays above it"


def test_case_study_sentences():
    case = pd.DataFrame({
        "model": ["a", "b", "a", "b", "a"], "variant": ["original", "original", "translation", "translation",
                                                        "rewording"],
        "language": ["en", "en", "sw", "sw", "en"], "soft": [0.8, 0.7, 0.4, 0.75, 0.78],
        "choice": ["stereotyped", "stereotyped", "anti-stereotyped", "stereotyped", "stereotyped"],
        "drop": [0.0, 0.0, 0.4, -0.05, 0.02]})
    kept, lowest, reworded = case_study.translations_text(case)
    assert kept == "a keeps the stereotyped choice in 0 of 1 translations; b keeps the stereotyped choice in 1 of 1 translations."
    assert lowest.startswith("The largest fall is in Swahili (sw) for a: 0.400, 0.400 below its English score")
    assert reworded == "; its one English rewording scores 0.780."
    risen = case.assign(drop=[0.0, 0.0, -0.1, -0.05, 0.02], soft=[0.8, 0.7, 0.9, 0.75, 0.78])
    assert case_study.translations_text(risen)[1].startswith("No translation scores below its model's English score.")


def test_rewording_sentence_edge_cases():
    assert case_study.rewording_sentence(pd.Series([], dtype=float)) == "."
    assert case_study.rewording_sentence(pd.Series([0.5, 0.5])) == "; its 2 English rewordings all score 0.500."
    assert case_study.rewording_sentence(pd.Series([0.2, 0.4, 0.9])) == (
        "; its 3 English rewordings score 0.500 on average (from 0.200 to 0.900).")


def test_the_error_run_sentence_says_when_errors_1_and_2_change_nothing():
    flags = {"stereoset_label_map": False, "bbq_roles_by_order": False, "scorer_boundary": False}
    def setting(name, soft, empty=0):
        return {"setting": name, "english_soft": soft, "english_binary": 0.6, "cells_below": 3, "n_cells": 4,
                "reliable_drops": 1, "slope_rewording": 0.6, "slope_translation": 0.2, "empty_options": empty, **flags}
    errors = pd.DataFrame([setting("none", 0.55), setting("scorer_boundary", 0.52, empty=3),
                           setting("stereoset_label_map + bbq_roles_by_order + scorer_boundary", 0.52)])
    per_source = pd.DataFrame({"setting": errors["setting"], "source": "written", "english_soft": errors["english_soft"]})
    text = label_errors.run_text(errors, per_source)
    assert "include no StereoSet or BBQ item, so errors 1 and 2 leave every number unchanged" in text
    assert text.endswith("moves the English soft score to 0.520 and the translation slope to 0.20, and leaves 3 model "
                         "× version rows with an unscored continuation.")
    assert label_errors.run_text(errors.iloc[0:0], per_source) == "No rerun was possible on this run's items (see above)."


def test_the_floor_is_read_against_the_noise_only_value():
    from biasaudit.book.chapters.noise_floor import floor_against_noise

    assert floor_against_noise(0.0094, 0.0121).startswith("The floor (0.0094) is no larger than the noise-only value "
                                                          "(0.0121): rewording moves the mean")
    assert "part of the floor is a systematic effect" in floor_against_noise(0.02, 0.01)


def test_the_scoring_sentence_does_not_pass_a_warm_rerun_off_as_speed():
    def timings(*rows):
        return pd.DataFrame(rows, columns=["model", "scored_now", "read_back", "seconds", "batch_size"])

    cold = score.scoring_sentence(timings(("a", 832, 0, 95.2, 16), ("b", 832, 0, 98.4, 16)))
    assert cold == "Scoring 1,664 item versions for 2 models took 194 s."
    warm = score.scoring_sentence(timings(("a", 0, 832, 0.1, "auto"), ("b", 0, 832, 0.2, "auto")))
    assert warm.startswith("Every version was already stored") and "nothing was scored now" in warm
    assert "1,664 stored scores" in warm and "took 0 s" in warm
    resumed = score.scoring_sentence(timings(("a", 100, 732, 12.0, 16)))
    assert resumed == ("Scoring 100 item versions for 1 model took 12 s; 732 more were read back from an "
                       "earlier run of this run name.")
    # an engine's start-up and check are said apart from the scoring, whose seconds give the speed
    started = pd.DataFrame([("a", 112, 0, 27.0, 16, 95.4, "vllm")],
                           columns=["model", "scored_now", "read_back", "seconds", "batch_size", "load_seconds", "engine"])
    assert score.scoring_sentence(started) == ("Scoring 112 item versions for 1 model took 27 s, after 95 s "
                                               "starting and checking the engine.")
    loaded = started.assign(engine="transformers", load_seconds=3.2)
    assert score.scoring_sentence(loaded).endswith("took 27 s, after 3 s loading the models.")


def test_the_engine_sentence_says_what_a_server_computes_in():
    def sentence(**changes):
        params = RunParams(engine="completions", engine_url="http://127.0.0.1:8000/v1", **changes)
        return score.engine_sentence(params, pd.DataFrame({"scored_now": [1]}))

    assert "declared to compute in float32 (engine_precision), and its rows are stored as completions-float32, " \
           "held to fp32's agreement" in sentence(engine_precision="float32")
    assert "stored as completions-bfloat16." in sentence(engine_precision="bfloat16")
    assert "precision is not declared (engine_precision)" in sentence()
    assert "precision" not in score.engine_sentence(RunParams(), pd.DataFrame({"scored_now": [1]}))


def test_the_precision_sentence_names_each_models_precision_and_never_hides_a_mix():
    def rows(*values):
        return pd.DataFrame(values, columns=["model", "precision", "versions"])

    plain = score.precision_sentence(rows(("smollm2-135m", "float32", 832), ("gemma3-270m", "float32", 832)), "auto",
                                     native_bf16=True)
    assert plain.startswith("This run's stored scores were computed gemma3-270m in float32; smollm2-135m in float32. ")
    assert "computes bf16 natively" in plain and "scoring_dtype is auto, which scores in fp32 on a CPU" in plain
    assert "mix" not in plain
    mixed = score.precision_sentence(rows(("a", "bfloat16", 100), ("a", "float32", 732), ("b", "not recorded", 5)),
                                     "bfloat16", native_bf16=False)
    assert mixed.startswith("This run's stored scores were computed a in bfloat16 (100 versions), float32 (732 "
                            "versions); b in a precision not recorded (stored before it was).")
    assert "The scores of a mix precisions" in mixed and "has no native bf16" in mixed and "named by this run" in mixed
    assert score.precision_sentence(rows(), "auto", native_bf16=False).startswith("No scores are stored")
    assert not any(mark in text for text in (plain, mixed) for mark in "`*"), "glued as plain text: no Markdown"


def test_the_reliability_summary_claims_only_what_the_sweep_shows():
    assert "makes no claim" in reliability.summary_text(None) and "recovered" not in reliability.summary_text(None)
    table = pd.DataFrame({"case": ["params: unknown key", "runs: killed and resumed", "runs: no network",
                                   "items: BOM and CRLF"],
                          "outcome": ["clear error", "recovered", "FAILED: 2 connection attempts", "right result"],
                          "lost": [0, 0, 0, 0]})
    text = reliability.summary_text(table)
    assert text.startswith("Of the last sweep's 4 cases, 1 bad inputs ended in an error") and "1 FAILED" in text
    assert "network" not in text, "a failed no-network case is not claimed"
    table.loc[2, "outcome"] = "right result"
    assert reliability.summary_text(table).endswith("none failed. In it, the default pipeline made no network connection.")
    assert reliability.summary_text(table, quick=True).startswith("Of this build's quick sweep's 4 cases")


def test_the_reliability_page_says_which_sweep_it_shows():
    from biasaudit.sweep import cases

    table = pd.DataFrame({"case": ["params: unknown key", "runs: stale lock"], "outcome": ["clear error", "recovered"],
                          "lost": [0, 0]})
    meta = {"finished": "2026-12-03 13:00:00", "seconds": 17.2, "all_cases": len(cases.CASES),
            "slow_cases": list(cases.SLOW_CASES)}  # as the quick sweep records them
    quick = reliability.sweep_text(table, meta, quick=True)
    assert quick.startswith(f"This machine has run no full sweep, so this build ran the quick one (finished 2026-12-03 "
                            f"13:00:00 after 17.2 s): 2 of the {len(cases.CASES)} cases. The 3 slow ones (\"scoring: "
                            "leading space given to score()\", \"runs: killed and resumed\" and \"runs: no network\") "
                            "run with")
    assert quick.endswith("1 clear errors, 1 recovered faults and 0 right results; 0 stored rows lost.")
    full = reliability.sweep_text(table, meta, quick=False)
    assert full.startswith("The last sweep on this machine finished 2026-12-03 13:00:00 after 17.2 s: 2 cases.")
    assert set(cases.QUICK_CASES) | set(cases.SLOW_CASES) == set(cases.CASES)


def test_the_label_error_summary_names_only_the_sections_the_page_has():
    nothing = label_errors.summary_text([False, False, False], pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    assert "No error could be shown" in nothing and "released" not in nothing and "eight combinations" not in nothing
    errors = pd.DataFrame({"setting": ["none"]})
    written_only = label_errors.summary_text([False, False, True], errors, pd.DataFrame({"source": ["written"]}),
                                             pd.DataFrame())
    assert "shown on a concrete item here: the tokens the boundary error leaves unscored." in written_only
    assert "errors 1 and 2 change nothing here" in written_only and "released" not in written_only
    both = label_errors.summary_text([True, True, True], errors, pd.DataFrame({"source": ["stereoset", "bbq"]}),
                                     pd.DataFrame({"setting": ["none"]}))
    assert "change nothing" not in both and "paper's released scores" in both


def cross_table(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns, index=pd.Index(["es", "ko", "sw"][:len(next(iter(columns.values())))],
                                                name="language"))


def test_the_judge_sentences_read_right_for_ties_one_language_and_none():
    assert "nothing to read" in translate.judge_text(cross_table(median=[], unrelated_mean=[], separated=[]), "e5")
    text = translate.judge_text(cross_table(median=[0.9, 0.8, 0.85], unrelated_mean=[0.7, 0.72, 0.71],
                                              separated=[1.0, 1.0, 1.0]), "e5")
    assert "is from 0.800 in Korean (ko) to 0.900 in Spanish (es)" in text
    assert "from 0.700 to 0.720" in text and "is 100% in every language: the judge tells" in text, text
    assert "or more" not in text, "no '100% or more'"
    weak = translate.judge_text(cross_table(median=[0.9, 0.8], unrelated_mean=[0.7, 0.7],
                                              separated=[0.98, 0.11]), "e5")
    assert "from 11% in Korean (ko) to 98% in Spanish (es)" in weak and "cannot tell" in weak
    assert translate.faithful_text(cross_table(faithful=[0.11, 0.98]), 0.9).endswith("with the same care.")
    one = translate.faithful_text(cross_table(faithful=[0.5]), 0.9)
    assert one == 'At the fixed threshold of 0.9, the share of "faithful" translations is 50% in Spanish (es).'


def test_the_machine_sentence_without_any_translation_says_why():
    nan = float("nan")
    none = translate.machine_text(tried=6, made=0, reasons=["empty reply"] * 6, machine_median=nan,
                                    human_median=nan, machine_calibrated=nan, human_calibrated=nan, chrf=nan)
    assert none.startswith("None of the 6 item translations attempted") and "nan" not in none
    assert none.endswith("The 6 failures: empty reply (6).")
    poor = translate.machine_text(tried=6, made=4, reasons=["x", "y"], machine_median=0.8, human_median=0.9,
                                    machine_calibrated=0.1, human_calibrated=0.8, chrf=12.0)
    assert poor.startswith("Of 6 item translations attempted, 4 passed") and "about as close" in poor
    good = translate.machine_text(tried=2, made=2, reasons=[], machine_median=0.9, human_median=0.9,
                                    machine_calibrated=0.85, human_calibrated=0.9, chrf=70.0)
    assert "come close to the human translations" in good


def test_the_translation_summary_follows_what_the_run_found():
    assert "in every language of this run" in translate.judge_summary(cross_table(separated=[0.95, 1.0]))
    assert "does not separate" in translate.judge_summary(cross_table(separated=[0.95, 0.4]))
    assert "not checked" in translate.judge_summary(cross_table(median=[0.9]))
    assert "only the human translations" in translate.machine_summary(made=0, machine_calibrated=float("nan"))
    assert "plainly poor" in translate.machine_summary(made=3, machine_calibrated=0.1)
    assert "plainly poor" not in translate.machine_summary(made=3, machine_calibrated=0.8)


def test_the_items_tables_count_versions_per_language_and_bases_per_dimension():
    rows = [("written", "gender", "original", "en"), ("written", "gender", "translation", "sw"),
            ("written", "gender", "rewording", "en"), ("written", "gender", "rewording", "en"),
            ("written", "age", "original", "en"), ("written", "age", "translation", "sw"),
            ("bbq", "age", "original", "en")]
    table = pd.DataFrame(rows, columns=["source", "dimension", "variant", "language"])
    versions = items.version_counts(table)
    # original first, then rewordings, then translations; a column per source and their total
    assert versions.to_dict("records") == [
        {"variant": "original", "language": "en", "bbq": 1, "written": 2, "all": 3},
        {"variant": "rewording", "language": "en", "bbq": 0, "written": 2, "all": 2},
        {"variant": "translation", "language": "sw", "bbq": 0, "written": 2, "all": 2}]
    bases = items.base_counts(table.loc[table["variant"] == "original"])
    assert bases.to_dict("records") == [{"dimension": "age", "bbq": 1, "written": 1, "all": 2},
                                        {"dimension": "gender", "bbq": 0, "written": 1, "all": 1}]
    one_source = items.base_counts(table.loc[(table["variant"] == "original") & (table["source"] == "written")])
    assert list(one_source.columns) == ["dimension", "written"], "no total beside a single source"


def test_spike_in_sentence_says_where_shift_and_power_differ():
    from biasaudit.book.chapters.detection import spike_in_text

    table = pd.DataFrame({"delta": [0.0, 0.05, 0.1], "shift_agrees": [True, True, True],
                          "power_agrees": [True, False, False]})
    text = spike_in_text(table, n_models=1, n_cells=3)
    assert text.startswith("On this run's 3 null cells (1 model with rewordings), the shift is within two Monte "
                           "Carlo standard errors of the released one at every δ, and the power differs from the "
                           "released one by more than two Monte Carlo standard errors at δ = 0.05 and 0.1.")
    assert "The released curve (spike_in_null_200.csv, 200 runs per δ) is the paper's Figure 1." in text
    assert "superseded" not in text
    both = spike_in_text(table.assign(power_agrees=True), n_models=4, n_cells=12)
    assert "the power is within two Monte Carlo standard errors of the released one at every δ." in both
    old = spike_in_text(table, n_models=4, n_cells=12, file="spike_in_null.csv", runs=40)
    assert "(spike_in_null.csv, 40 runs per δ)" in old and "the paper's first, superseded curve" in old


def test_the_two_released_label_error_tables_are_explained():
    from biasaudit.book.chapters.label_errors import as_run_text

    as_run, same = pd.DataFrame({"n_items": [362, 387, 362, 387]}), pd.DataFrame({"n_items": [362] * 4})
    text = as_run_text(as_run, same)
    assert "scores all of them as stored (387 English items), while one that fixes BBQ leaves out the 25" in text
    assert as_run_text(pd.DataFrame(), same) == ""


def test_the_verdict_beside_the_papers_conclusion():
    from biasaudit.analyses import verdict as v
    from biasaudit.book.chapters.verdict import paper_table, paper_text
    from biasaudit.data.release_files import RELEASED_MODELS

    languages = pd.DataFrame({"language": ["ar", "hi", "ko", "sw", "es"],
                              "verdict": [v.BEYOND_TYPICAL, v.REAL, v.REAL, v.REAL, v.NOISE]})
    table = paper_table(languages)
    assert table["paper"].tolist() == ["no such claim", "clearly exceeds rewording", "clearly exceeds rewording",
                                       "clearly exceeds rewording", "no such claim"]
    ten = list(RELEASED_MODELS)
    assert paper_text(table, ten) == (
        "This run is the paper's released study, all ten of its models. The book's verdict and the paper's "
        "conclusion agree in every language: a real shift exactly where the paper says the drop clearly exceeds "
        "what rewording English produces.")
    apart = paper_table(languages.assign(verdict=[v.REAL, v.REAL, v.UNCLEAR, v.REAL, v.NOISE]))
    assert "The two part ways for Arabic (ar) and Korean (ko). On the paper's ten models" in paper_text(apart, ten)
    one = paper_text(apart, ["llama3.1-8b"])
    assert one.startswith("This run holds 1 model of the paper's ten (llama3.1-8b), so the comparison is partial")
    assert "aya-23-8b" in one and "fewer than 5 models" in one
    assert "not the paper's released study" in paper_text(pd.DataFrame(), ["smollm2-135m"])


def test_the_verdict_page_says_which_interval_and_which_floors():
    from biasaudit.analyses import verdict as v
    from biasaudit.book.chapters.verdict import basis_text, floors_text, summary_text

    two = pd.DataFrame({"language": ["es", "zh"], "n_models": [2, 2], "basis": [v.OVER_ITEMS] * 2})
    assert basis_text(two).startswith("With 2 models (fewer than 5), an interval across models would rest on 1 "
                                      "degree of freedom")
    one = pd.DataFrame({"language": ["es"], "n_models": [1], "basis": [v.OVER_ITEMS]})
    assert basis_text(one).startswith("With one model there is no interval across models, so each language's interval "
                                      "is a bootstrap over items of the model's per-item drops")
    ten = pd.DataFrame({"language": ["es", "zh"], "n_models": [10, 10], "basis": [v.ACROSS_MODELS] * 2})
    assert basis_text(ten).startswith("With 10 models, each language's interval is a Student-t interval across")
    mixed = pd.DataFrame({"language": ["es", "zh"], "n_models": [5, 4], "basis": [v.ACROSS_MODELS, v.OVER_ITEMS]})
    assert basis_text(mixed) == ("The interval is across models for Spanish (es), which has at least 5 models, and "
                                 "over items for the others.")
    floors = pd.Series({"b": 0.004, "a": 0.0133, "c": 0.001})
    assert floors_text(floors) == ("The models' floors run from 0.0010 (c) to 0.0133 (a); the typical (median) "
                                   "floor is 0.0040.")
    assert floors_text(floors.iloc[:1]) == "The one model's floor, 0.0040 (b), is both the typical and the largest floor."
    assert "no noise floor" in floors_text(pd.Series(dtype=float))
    verdicts = pd.DataFrame({"language": ["es", "hi", "ko", "zh"], "verdict": [v.NOISE, v.REAL, v.REAL, v.UNCLEAR]})
    assert summary_text(verdicts) == ("real shift: Hindi (hi) and Korean (ko); too little evidence: Chinese (zh); "
                                      "within noise: Spanish (es).")
    assert "no language has a verdict" in summary_text(verdicts.iloc[0:0])


def test_chapter_16_says_where_its_test_and_the_verdict_differ():
    from biasaudit.analyses import verdict as v
    from biasaudit.book.chapters.faithful import tests_text

    tests = pd.DataFrame({"subset": ["all items"] * 3, "language": ["fr", "hi", "es"], "n_items": [40, 40, 38],
                          "excess_drop": [0.02, 0.05, -0.01], "reliable": [True, True, False]})
    verdicts = pd.Series({"fr": v.BEYOND_TYPICAL, "hi": v.REAL, "es": v.NOISE})
    text = tests_text(tests, verdicts)
    assert text.startswith("all items (40 items at most per language): in 2 of 3 languages translation reliably lowers "
                           "the score more than rewording does (French (fr) and Hindi (hi)).")
    assert 'The verdict of chapter 22 calls French (fr) "beyond the typical floor, not clearly":' in text
    assert 'Hindi (hi) "' not in text  # a real shift agrees: nothing to explain
    assert tests_text(tests, verdicts.replace(v.BEYOND_TYPICAL, v.REAL)).endswith("(French (fr) and Hindi (hi)).")
    assert tests_text(tests.iloc[0:0], verdicts) == "This run has no items with both translations and rewordings."


def test_chapter_19_tells_the_power_per_language_first():
    from biasaudit.book.chapters.detection import power_clause, power_text, weak_text

    by_language = pd.DataFrame({"language": ["es", "zh", "sw"], "power_observed": [0.15, 0.64, 0.9]})
    assert power_text(by_language) == ("The cell test's power at each language's own scatter and observed drop (median "
                                       "over the models) runs from 15% in Spanish (es) to 90% in Swahili (sw).")
    # the clause a solution continues: "At alpha 0.01, the cell test's power ...; at the chapter's rate, ..."
    assert power_clause(by_language).startswith("the cell test's power at each") and not power_clause(
        by_language).endswith(".")
    assert power_text(by_language.iloc[:1]).endswith("is 15% in Spanish (es).")
    weak = weak_text(by_language)
    assert weak.startswith("For Spanish (es) and Chinese (zh), a drop the size of the observed one would be called "
                           "reliable in fewer than 80% of the runs")
    assert "The verdict does not rest on the cell tests" in weak
    assert weak_text(by_language.assign(power_observed=0.95)).startswith("For every language, a drop the size")


def test_chapter_12_counts_cells_against_the_noise_only_value_it_shows():
    from biasaudit.book.chapters.models import above_noise

    # Model a shows noise only (0.03 + 0.01) / 2 = 0.02 in its column: 0.05 is above twice that, 0.03 is not,
    # although 0.03 is above twice its own cell's 0.01. Model b shows 0.02: its 0.045 is above 0.04, though
    # not above twice its own cell's 0.025.
    cells = pd.DataFrame({"model": ["a", "a", "b", "b"], "drop": [0.05, -0.03, 0.045, 0.01],
                          "noise_only": [0.03, 0.01, 0.025, 0.015]})
    assert above_noise(cells) == 2
    assert int((cells["drop"].abs() > 2 * cells["noise_only"]).sum()) == 1  # the per-cell count differs


def test_chapter_14_names_the_one_source_as_such():
    from biasaudit.book.chapters.sources import drop_text

    row = {"n_cells": 14, "drop": 0.0512, "drop_low": 0.021, "drop_high": 0.08, "n_translated": 64}
    one = pd.DataFrame([{"source": "written", **row}])
    assert drop_text(one) == ("Over the written items, the one source with translations in this run, the drop is 0.051 "
                              "(95% interval 0.021 to 0.080, over 64 items).")
    two = pd.DataFrame([{"source": "written", **row}, {"source": "bbq", **row, "drop": 0.01, "drop_low": -0.02,
                                                        "drop_high": 0.04, "n_translated": 30}])
    assert drop_text(two) == ("The largest drop is in the written items (0.051, 95% interval 0.021 to 0.080, over 64 "
                              "items). The smallest is in BBQ (0.010, -0.020 to 0.040).")


def test_chapter_20_leaves_out_settings_whose_errors_cannot_touch_the_items():
    from biasaudit.analyses import ERROR_FLAGS, error_settings, setting_name
    from biasaudit.book.chapters.label_errors import applicable, left_out_text

    errors = pd.DataFrame([{**s, "setting": setting_name(s)} for s in error_settings()])
    written = applicable(errors, {"written"})
    assert written["setting"].tolist() == ["none", "scorer_boundary"]
    assert left_out_text(errors, written) == (
        "The rescored items include no StereoSet or BBQ item, so errors 1 and 2, which change only those items, would "
        "repeat the rows without them: the table shows the 2 settings that differ, of 8.")
    with_bbq = applicable(errors, {"written", "bbq"})
    assert len(with_bbq) == 4 and not with_bbq["stereoset_label_map"].any()
    assert left_out_text(errors, with_bbq).startswith("The rescored items include no StereoSet item, so error 1, which "
                                                      "changes only those items, would repeat the rows without it:")
    both = applicable(errors, {"stereoset", "bbq"})
    assert len(both) == 8 and left_out_text(errors, both) == ""
    assert set(ERROR_FLAGS) <= set(both.columns)


def test_chapter_30_counts_unprocessable_templates_among_those_asked():
    from biasaudit.book.chapters.template_tests import error_counts

    verdicts = ["Passed", "Error", "Error", "Failed", "Error"]  # 5 asked: 2 judged, 3 unprocessable
    evaluations = pd.DataFrame({"model": "m", "variant": "translation", "language": "hi", "verdict": verdicts})
    row = error_counts(evaluations).iloc[0]
    assert (row["asked"], row["total"], row["errors"]) == (5, 2, 3)
    assert row["error_share"] == pytest.approx(3 / 5)


def test_the_case_study_says_why_it_follows_its_item():
    from biasaudit.book.chapters import case_study

    assert case_study.how_chosen("", "") == ("chosen because its English original leans most strongly to the "
                                             "stereotype in every model")
    assert case_study.how_chosen("ac_003", "ac_003") == "chosen with the base_id parameter"
    assert case_study.how_chosen("ac_003", "").endswith(
        "every model: the item the base_id parameter names, ac_003, is not in this run's scores")


def test_the_pooled_curves_scatter_is_compared_as_it_is():
    from biasaudit.book.chapters import detection

    assert detection.scatter_text(0.150, 0.173, 0.228).startswith("scatter less (median SD 0.150) than the language "
                                                                  "cells above (SD 0.173 to 0.228)")
    # the released study's case: 0.190 lies inside 0.173 to 0.228, so "less" would be wrong
    assert detection.scatter_text(0.190, 0.173, 0.228).startswith("scatter within the range of the language cells "
                                                                  "above (median SD 0.190, against SD 0.173 to 0.228)")
    assert "scatter more" in detection.scatter_text(0.3, 0.173, 0.228)
    assert "(SD 0.200)" in detection.scatter_text(0.1, 0.2, 0.2)


def test_the_preserved_translations_carry_over_is_said_beside_every_translations():
    table = pd.DataFrame({"change": ["translation"], "group": ["all"], "slope": [0.26], "r": [0.23]})
    assert carry_over.preserved_text(table, None).startswith("This run has no contrast judgments")
    preserved = pd.DataFrame({"change": ["translation"], "group": ["all"], "n_pairs": [17290], "n_items": [357],
                              "slope": [0.284], "slope_low": [0.241], "slope_high": [0.324], "r": [0.273]})
    assert carry_over.preserved_text(table, preserved).startswith(
        "On the 17,290 translated pairs whose contrast is preserved (357 base items), the slope is 0.28 (95% interval "
        "0.24 to 0.32) and r 0.27, against 0.26 and 0.23 with every translation.")


def test_chapter_18_says_where_word_frequencies_enter_the_length_fit():
    nan = float("nan")
    fit = pd.DataFrame({"language": ["es", "ko"], "n_pairs": [349, 361], "agreement_change": [nan, nan],
                        "agreement_length": [nan, nan], "r2_length": [0.1087, 0.0671],
                        "n_pairs_frequency": [349, nan], "agreement_length_frequency": [nan, nan],
                        "r2_length_frequency": [0.1594, nan]})
    matched = pd.DataFrame({"pairs": ["equal length", "all"], "n_pairs": [503, 2497], "drop": [0.029, 0.0173],
                            "slope": [0.407, 0.326]})
    text = agreement.length_text(fit, matched)
    assert text.startswith("Fitted to the changes per language, the lengths' R² is from 0.067 to 0.109. With the "
                           "words' frequencies added (in Spanish (es), where")
    assert "the R² is 0.159." in text and "it needs at least two models" in text
    fit = fit.assign(r2_length_frequency=nan, agreement_change=[0.3, 0.4])
    text = agreement.length_text(fit, matched)
    assert "Word frequencies are not added" in text and "two models" not in text
    assert "On the 503 pairs" in text and "against 0.017 and 0.33 on all 2,497 pairs" in text
