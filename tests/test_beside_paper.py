"""A model scored on the paper's own items beside its ten released models (`item_banks: [paper]` with
`released_scores`): the paper's bank sampled by base, the run's own scores kept through a re-import, the
model marked as this run's on every table, and the verdict computed with it and without it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from biasaudit.book.chapters import verdict as verdict_chapter
from biasaudit.core.store import ScoreStore
from biasaudit.data import release_files
from biasaudit.data.release_items import paper_bank, paper_bank_folder, sample_bases
from biasaudit.data.released import WITHIN_REWRITER, load_released
from biasaudit.run import pipeline
from biasaudit.run.params import validate_params
from biasaudit.run.synthetic import made_up_release

RELEASED = ["made-a", "made-b", "made-c"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder = tmp_path_factory.mktemp("release")
    made_up_release(folder, RELEASED, fraction=0.03)
    return folder


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    return tmp_path


def beside_params(release, **changes):
    return validate_params({"run_name": "beside", "released_scores": str(release), "item_banks": ["paper"],
                            "models": ["tiny-random"], "paper_sample": 6, "n_permutations": 200,
                            "n_bootstrap": 100, "n_runs": 5, **changes}, "the test")


def test_the_sample_draws_whole_bases_in_proportion_to_the_categories():
    # 12 bases: 6 of category a, 3 each of b and c; a third of them is 2 of a, 1 of b, 1 of c
    items = pd.DataFrame({"base_id": [f"{c}{i}" for c, n in (("a", 6), ("b", 3), ("c", 3)) for i in range(n)],
                          "category": ["a"] * 6 + ["b"] * 3 + ["c"] * 3})
    chosen = sample_bases(items, 4, seed=1)
    assert len(chosen) == 4 and sorted(b[0] for b in chosen) == ["a", "a", "b", "c"]
    assert chosen == sample_bases(items, 4, seed=1), "the same seed, the same sample"
    assert any(sample_bases(items, 4, seed=s) != chosen for s in range(2, 12)), "another seed, another sample"
    assert sample_bases(items, 0, seed=1) == sample_bases(items, 99, seed=1) == sorted(items["base_id"])


def test_the_paper_bank_is_the_releases_versions_with_their_texts(release):
    items, collapsed, folder = paper_bank(release)
    assert folder == release
    released = load_released(release, drop_collapsed=False).scores.drop_duplicates("item_id").set_index("item_id")
    # the within-language rewordings' texts are not among the paper's item files: the bank has no such version
    released = released.loc[released["via"] != WITHIN_REWRITER]
    bank = pd.concat([items, collapsed]).set_index("item_id")
    assert set(bank.index) == set(released.index), "the same versions, under the same ids"
    # the score files name a rewording by its original's prompt id: contexts compare on the other versions
    named = released.loc[released["variant"] != "rewording"]
    assert (bank.loc[named.index, "context"] == named["context"]).all()
    # the paper's rule and the scores agree on what collapsed: equal log-probs exactly where the texts are one
    same_scores = released.loc[released["lp_mean_stereotyped"] == released["lp_mean_anti_stereotyped"]].index
    assert set(collapsed["item_id"]) == {i for i in same_scores if released.loc[i, "variant"] != "original"}
    sampled, _, _ = paper_bank(release, sample=5, seed=3)
    assert sampled["base_id"].nunique() == 5
    assert len(sampled) == len(items.loc[items["base_id"].isin(sampled["base_id"])]), "every version of a base kept"


def test_a_model_scored_beside_the_release_is_marked_kept_and_resumed(release, runs):
    params = beside_params(release)
    assert params.beside_paper and params.model_filter is None
    pipeline.run_scoring(params)
    own = json.loads((runs / "beside" / "beside.json").read_text())
    assert own["this_run"] == ["tiny-random"]
    scores = pipeline.read_scores("beside")
    assert sorted(scores["model"].unique()) == [*RELEASED, "tiny-random (this run)"]
    mine = scores.loc[scores["model"] == "tiny-random (this run)"]
    assert mine["base_id"].nunique() == 6
    assert {"original", "translation", "rewording"} <= set(mine["variant"]), "its own floor: the rewordings too"
    assert len(scores.loc[scores["model"] == "made-a"]) > len(mine), "the released models keep all their items"
    # the import gives each rewording its own texts (noise_floor_paraphrases.json), as the bank does
    items = pd.read_parquet(runs / "beside" / "items.parquet").set_index("item_id")
    bank, _, _ = paper_bank(release)
    rewordings = bank.loc[bank["variant"] == "rewording"].set_index("item_id")
    assert rewordings["context"].str.startswith("Reworded context").all()
    assert (items.loc[rewordings.index, "context"] == rewordings["context"]).all()
    # a chapter that filters by the run's own model list keeps every model of such a run
    chapter_params = validate_params({"run_name": "beside", "models": ["tiny-random"]}, "a chapter")
    assert chapter_params.model_filter is None
    # a second run reimports the release and reads the model's scores back instead of scoring them again
    again = pipeline.run_scoring(params).tables["timings"]
    assert again["scored_now"].tolist() == [0] and again["read_back"].tolist() == [len(mine)]
    assert len(ScoreStore(runs / "beside").read(model="tiny-random")) == len(mine)
    # chapter 20 rescores nothing on such a run, and says which models are the paper's and which could be
    plan = pipeline.ablation_plan(params, pd.read_parquet(runs / "beside" / "items.parquet"),
                                  sorted(scores["model"].unique()))
    assert plan.items.empty
    assert plan.text.startswith("The paper's models (made-a, made-b, made-c) are names of scores")
    assert plan.text.endswith("tiny-random (this run) could be rescored: a run of it without the released scores "
                              "shows the errors on it.")


def test_the_verdict_page_gives_both_verdicts(release, runs):
    params = beside_params(release)
    pipeline.run_scoring(params)
    report = verdict_chapter.report(params)
    beside = report.tables["beside"]
    assert sorted(beside.columns) == ["language", "with", "without"]
    assert set(beside["language"]) == {"es", "fr", "zh", "ar", "ko", "sw", "hi"}
    text = report.values["beside_text"]
    assert "tiny-random (this run)" in text and "the paper's 3 models" in text
    changed = (beside["with"] != beside["without"]).sum()
    assert ("changes no language's verdict" in text) == (changed == 0)
    # the paper's conclusion is set beside the paper's models' own verdicts
    assert report.tables["paper"]["book"].tolist() == beside["without"].tolist()


def test_a_released_models_name_is_refused_for_a_model_scored_here(release, runs, monkeypatch):
    # (only a local folder can bear such a name: the params refuse it otherwise; here, the name itself is made
    # a released one) its scores would replace the release's in the run's store
    monkeypatch.setattr(pipeline, "RELEASED_MODELS", (*release_files.RELEASED_MODELS, "tiny-random"))
    with pytest.raises(ValueError, match="name of a released model"):
        pipeline.prepare_run(beside_params(release))


def test_a_plain_run_of_the_same_name_is_no_longer_marked(release, runs):
    pipeline.run_scoring(beside_params(release))
    pipeline.prepare_run(validate_params({"run_name": "beside", "released_scores": str(release), "models": []},
                                         "the test"))
    assert not (runs / "beside" / "beside.json").exists()
    assert "tiny-random" not in set(pipeline.read_scores("beside")["model"])


def test_where_the_paper_bank_is_read_from(release, tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "data"
    (data / "released").mkdir(parents=True)
    for name in ("prompts.json", "label_fix.json"):
        (data / "released" / name).write_bytes((release / name).read_bytes())
    monkeypatch.setenv("BIASAUDIT_DATA_DIR", str(data))
    assert paper_bank_folder("") == data / "released", "no folder named: the data folder's released/"
    assert paper_bank_folder(str(release)) == release, "a folder named is read as it is"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(release_files.ReleasedDataError, match="needs prompts.json and label_fix.json"):
        paper_bank_folder(str(empty))
    # a run of the paper's items alone, without the released scores: read from the data folder
    items, collapsed, _ = pipeline.select_run_items(item_banks=["paper"], languages=["es", "sw"], paper_sample=3,
                                                    seed=5)
    assert items["base_id"].nunique() == 3 and set(items["language"]) == {"en", "es", "sw"}
    assert set(items["variant"]) == {"original", "translation"}, "no rewordings: their file is not there"
