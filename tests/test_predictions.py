"""What a rerun must give, worked out before any model runs: the numbers the minutes-long exercises'
solutions quote. Each is checked here on small cases counted by hand; the exercises' test holds them
against the commands' own runs on the CI run."""

from __future__ import annotations

import pandas as pd
import pytest
from biasaudit.book.chapters import score, template_tests, template_translation, translate
from biasaudit.run.params import RunParams
from biasaudit.run.pipeline import scores_in_item_order
from biasaudit.run.steps import StepTables, write_step
from biasaudit.run.study import Study
from biasaudit.templates.library import LANGBITE_QUOTE_NOTE

CI_BANK = "tests/fixtures/ci_bank.csv"


def ci_params(**changes) -> RunParams:
    return RunParams(**{"item_banks": [CI_BANK], "languages": ["es", "zh", "sw"], "models": ["tiny-random"],
                        **changes})


def test_the_translations_asked_for_are_the_sample_times_the_targets():
    # the CI bank has 14 English originals (two per dimension, seven dimensions)
    assert translate.planned_attempts(ci_params(n_sample_items=2, sample_languages=["sw"])) == 2
    assert translate.planned_attempts(ci_params(n_sample_items=2, sample_languages=[])) == 2 * 3  # the run's languages
    assert translate.planned_attempts(ci_params(n_sample_items=0, sample_languages=["es", "sw"])) == 14 * 2  # 0: all
    assert translate.planned_attempts(ci_params(n_sample_items=50, sample_languages=["es"])) == 14  # no more than there are


def test_a_first_run_scores_every_version_of_its_languages_for_every_model():
    bank = pd.read_csv(CI_BANK)
    in_en_es = int(bank["language"].isin(["en", "es"]).sum())  # originals, English and Spanish versions
    assert in_en_es == 14 + 42 + 14 + 14  # originals, English rewordings, Spanish translations and rewordings
    values = score.first_run_values(ci_params(languages=["es"], models=["tiny-random", "smollm2-135m"],
                                              scoring_dtype="bfloat16"))
    assert values["n_versions"] == in_en_es
    assert values["n_scored_now"] == 2 * in_en_es and values["n_read_back"] == 0
    text = values["precision_text"]
    assert "smollm2-135m in bfloat16; tiny-random in bfloat16." in text and "mix precisions" not in text
    assert "this run's scoring_dtype is bfloat16, named by this run" in text
    with pytest.raises(ValueError, match="name the precision"):
        score.first_run_values(ci_params(scoring_dtype="auto"))


def test_scores_are_kept_for_the_given_items_in_their_order_model_by_model():
    scores = pd.DataFrame({"model": ["m2", "m1", "m2", "m1", "m1", "m2"],
                           "item_id": ["a", "a", "c", "b", "c", "b"], "soft": [1, 2, 3, 4, 5, 6]})
    kept = scores_in_item_order(scores, pd.Series(["c", "a"]))
    assert list(zip(kept["model"], kept["item_id"], kept["soft"])) == [
        ("m1", "c", 5), ("m1", "a", 2), ("m2", "c", 3), ("m2", "a", 1)]


def test_a_restricted_study_analyses_its_items_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    whole = Study("r")
    whole.__dict__["scores"] = pd.DataFrame({"model": ["m", "m", "m"], "item_id": ["x", "y", "z"], "soft": [1, 2, 3]})
    part = whole.restricted_to(pd.Series(["z", "x"]))
    assert part.scores["item_id"].tolist() == ["z", "x"] and part.scores["soft"].tolist() == [3, 1]
    assert len(whole.scores) == 3 and part.fingerprint != whole.fingerprint  # its tables are stored apart
    with pytest.raises(ValueError, match="has not scored 1 of those versions"):
        whole.restricted_to(pd.Series(["x", "w"]))


def test_replies_with_langbites_note_are_counted_and_planned():
    replies = pd.DataFrame({"prompt_text": [f'Answer. {LANGBITE_QUOTE_NOTE} """x""".', 'Answer. The sentence is given '
                                            'between """.  """x""".', "No quote here."]})
    assert template_tests.noted(replies) == 1
    params = ci_params(chat_models=["tiny-random", "smollm2-135m"], max_templates=2, max_instances=1)
    own = template_tests.planned_values(params)
    english = template_tests.planned_values(params.model_copy(update={"quote_note": "english"}))
    assert own["n_langbite_note"] == 0  # the project's notes are its own words, English included
    assert english["n_templates"] == own["n_templates"] and english["n_prompts_asked"] == own["n_prompts_asked"]
    # with LangBiTe's note, every prompt that quotes a sentence carries it, once per chat model
    assert english["n_langbite_note"] > 0 and english["n_langbite_note"] % 2 == 0
    everything = template_tests.planned_values(params.model_copy(update={"max_templates": 0, "max_instances": 0}))
    assert everything["n_templates"] > own["n_templates"] and everything["n_prompts_asked"] > own["n_prompts_asked"]


def test_the_template_translations_asked_for_count_every_translator_and_language():
    one = template_translation.planned_values(ci_params(translators=["tiny-random"], reference_templates=1))
    two = template_translation.planned_values(ci_params(translators=["tiny-random", "smollm2-135m"],
                                                        reference_templates=1))
    assert one["n_sample"] == two["n_sample"] > 0 and two["n_asked"] == 2 * one["n_asked"]
    assert one["n_asked"] % one["n_sample"] == 0  # each sampled template in each reference language
    every = template_translation.planned_values(ci_params(translators=["tiny-random"], reference_templates=0))
    assert every["n_sample"] >= one["n_sample"]


def test_an_enlarged_sample_keeps_the_languages_chapter_01_last_ran_with(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="has not run chapter 01's step"):
        translate.planned_attempts_after("r", 6)
    ran = ci_params(run_name="r", sample_languages=["es", "zh"], n_sample_items=2)
    write_step(ran, "translate", StepTables({}, {}))
    assert translate.planned_attempts_after("r", 6) == 6 * 2
    assert translate.planned_attempts_after("r", 0) == 14 * 2
