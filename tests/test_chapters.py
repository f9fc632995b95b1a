"""The sentences chapters quote are computed, and branch, in the library: each branch on a table
built by hand, with the sentence a reader should see."""

from __future__ import annotations

import numpy as np
import pandas as pd
from biasaudit.chapters import (
    agreement,
    carry_over,
    case_study,
    dimensions,
    faithful,
    label_errors,
    scoring,
    sources,
)


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
    full = pd.DataFrame({"subset": ["all items", "fully preserved", "without StereoSet"]})
    assert faithful.subsets_text(full, pd.DataFrame(), 0.9) == ""


def test_within_language_carry_over_is_said_only_where_the_run_has_it():
    table = pd.DataFrame({"change": ["rewording"], "group": ["human-1"], "slope": [0.6]})
    assert carry_over.within_language_text(table, table.iloc[0]).startswith("This run has no rewordings of translated")
    within = pd.DataFrame({"change": ["within-language rewording"] * 3, "group": ["es", "hi", "all"],
                           "slope": [0.5, 0.3, 0.4], "slope_low": [0.1] * 3, "slope_high": [0.7] * 3,
                           "r": [0.5] * 3, "same_choice": [0.75] * 3})
    text = carry_over.within_language_text(pd.concat([table, within]), table.iloc[0])
    assert text.startswith("This run has rewordings within es, hi. Rewording within a language keeps a slope of 0.40")
    assert text.endswith("against 0.60 for rewording English.")


def test_case_study_sentences():
    case = pd.DataFrame({
        "model": ["a", "b", "a", "b", "a"], "variant": ["original", "original", "translation", "translation",
                                                        "rewording"],
        "language": ["en", "en", "sw", "sw", "en"], "soft": [0.8, 0.7, 0.4, 0.75, 0.78],
        "choice": ["stereotyped", "stereotyped", "anti-stereotyped", "stereotyped", "stereotyped"],
        "change": [0.0, 0.0, -0.4, 0.05, -0.02]})
    kept, lowest, reworded = case_study.translations_text(case)
    assert kept == "a keeps the stereotyped choice in 0 of 1 translations; b keeps the stereotyped choice in 1 of 1 translations."
    assert lowest.startswith("The largest fall is in Swahili (sw) for a: 0.400, 0.400 below its English score")
    assert reworded == "; its English rewordings score 0.780 on average (from 0.780 to 0.780)."


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
    from biasaudit.chapters.floor import floor_against_noise

    assert floor_against_noise(0.0094, 0.0121).startswith("The floor (0.0094) is no larger than the noise-only value "
                                                          "(0.0121): rewording moves the mean")
    assert "part of the floor is a systematic effect" in floor_against_noise(0.02, 0.01)


def test_the_scoring_sentence_does_not_pass_a_warm_rerun_off_as_speed():
    def timings(*rows):
        return pd.DataFrame(rows, columns=["model", "scored_now", "read_back", "seconds", "batch_size"])

    cold = scoring.scoring_sentence(timings(("a", 832, 0, 95.2, 16), ("b", 832, 0, 98.4, 16)))
    assert cold == "Scoring 1,664 item version(s) for 2 model(s) took 194 s."
    warm = scoring.scoring_sentence(timings(("a", 0, 832, 0.1, "auto"), ("b", 0, 832, 0.2, "auto")))
    assert warm.startswith("Every version was already stored") and "nothing was scored now" in warm
    assert "1,664 stored scores" in warm and "took 0 s" in warm
    resumed = scoring.scoring_sentence(timings(("a", 100, 732, 12.0, 16)))
    assert resumed == ("Scoring 100 item version(s) for 1 model(s) took 12 s; 732 more were read back from an "
                       "earlier run of this run name.")
