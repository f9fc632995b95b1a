"""biasaudit.data.released: the paper's released scores mapped onto the scores table.

Unit tests run on tests/fixtures/released/ (invented numbers in the release's exact schema; see
its README). The integration tests at the end (marked `mirror`) run only where the real released
files are ($BIASAUDIT_DATA_DIR/released) and reproduce the paper's own per-cell results for
Llama-3.1-8B.
"""

from __future__ import annotations

import io as stdio
import json
import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.core.options import DEFAULT_SEED, StudyOptions
from biasaudit.data import downloads, release_files
from biasaudit.data import released as rel
from biasaudit.data.item_table import ITEM_COLUMNS
from biasaudit.data.release_import import import_released
from biasaudit.run import pipeline
from scipy.special import expit

FIXTURES = Path(__file__).parent / "fixtures" / "released"


@pytest.fixture
def released() -> rel.Released:
    return rel.load_released(FIXTURES)


def _row(scores: pd.DataFrame, model: str, item_id: str) -> pd.Series:
    rows = scores.loc[(scores["model"] == model) & (scores["item_id"] == item_id)]
    assert len(rows) == 1, f"{model} {item_id}: {len(rows)} rows"
    return rows.iloc[0]


def test_mapping_onto_the_scores_table(released):
    scores = released.scores
    assert list(scores.columns) == ["model", *ITEM_COLUMNS, *rel.SCORE_COLUMNS]
    assert set(scores["model"]) == {"tiny-a", "tiny-b"}
    assert set(scores["language"]) == {"en", "es", "zh"}, "zh-CN becomes zh; layer B is out by default"
    gp = _row(scores, "tiny-a", "gp_901/zh")
    assert (gp["base_id"], gp["source"], gp["dimension"], gp["category"]) == ("gp_901", "written", "gender",
                                                                              "gender_profession")
    assert (gp["variant"], gp["via"], gp["third_kind"]) == ("translation", "released", "unrelated")
    assert gp["context"] == "Context of gp_901 in zh-CN."
    assert (gp["lp_mean_stereotyped"], gp["lp_mean_anti_stereotyped"], gp["lp_mean_third"]) == (-2.0, -1.9, -2.5)
    assert scores[[c for c in rel.SCORE_COLUMNS if not c.startswith("lp_mean")]].isna().all().all()
    ss = _row(scores, "tiny-a", "ss_9001/en")
    assert (ss["source"], ss["dimension"], ss["category"], ss["variant"], ss["via"]) == (
        "stereoset", "race", "race", "original", "human")
    race = _row(scores, "tiny-a", "bbq_Race_ethnicity_900/es")
    assert (race["source"], race["dimension"], race["category"], race["third_kind"]) == (
        "bbq", "race", "Race_ethnicity", "unknown")
    assert scores[["stereotyped", "anti_stereotyped", "third"]].isna().all().all(), "no texts without prompts.json"


def test_label_fix_permutes_columns_and_drops_unrecoverable_items(released):
    scores = released.scores
    # StereoSet: stored (s, a) = (-2.5, -2.0) are swapped.
    ss = _row(scores, "tiny-a", "ss_9001/en")
    assert (ss["lp_mean_stereotyped"], ss["lp_mean_anti_stereotyped"], ss["lp_mean_third"]) == (-2.0, -2.5, -4.0)
    # Three-way: stereotype <- stored anti, anti <- stored unrelated, unrelated <- stored stereotype.
    race = _row(scores, "tiny-a", "bbq_Race_ethnicity_900/en")
    assert (race["lp_mean_stereotyped"], race["lp_mean_anti_stereotyped"], race["lp_mean_third"]) == (-1.0, -2.0, -3.0)
    # The rewordings get the same fix.
    de = _row(scores, "tiny-a", "ss_9001/en~de-s0")
    assert (de["lp_mean_stereotyped"], de["lp_mean_anti_stereotyped"]) == (-2.1, -2.4)
    assert not scores["base_id"].eq("bbq_Age_901").any()
    assert released.summary["english_bases"] == 4
    raw = rel.load_released(FIXTURES, fix_labels=False)
    assert raw.summary["english_bases"] == 5
    ss_raw = _row(raw.scores, "tiny-a", "ss_9001/en")
    assert (ss_raw["lp_mean_stereotyped"], ss_raw["lp_mean_anti_stereotyped"]) == (-2.5, -2.0)
    # The fix changes the English soft score exactly as the swap says.
    soft_raw = analyses.item_scores(raw.scores).set_index(["model", "item_id"])["soft"]
    soft_fixed = analyses.item_scores(scores).set_index(["model", "item_id"])["soft"]
    assert soft_fixed[("tiny-a", "ss_9001/en")] == pytest.approx(1 - soft_raw[("tiny-a", "ss_9001/en")])


def test_collapsed_contrasts_are_set_aside(released):
    collapsed = released.collapsed
    assert sorted(zip(collapsed["model"], collapsed["item_id"])) == [
        ("tiny-a", "bbq_Age_900/es"), ("tiny-a", "gp_901/en~ja-s1"), ("tiny-b", "bbq_Age_900/es")]
    assert not released.scores["item_id"].isin(collapsed["item_id"]).any()
    kept = rel.load_released(FIXTURES, drop_collapsed=False)
    assert len(kept.scores) == len(released.scores) + 3 and kept.collapsed.empty


def test_noise_floor_rows_become_rewordings(released):
    scores = released.scores
    tiny_a = scores.loc[scores["model"] == "tiny-a"]
    # One English original per base (the noise file's copies are checked and dropped).
    assert tiny_a.loc[tiny_a["variant"] == "original", "base_id"].is_unique
    reworded = tiny_a.loc[(tiny_a["variant"] == "rewording") & (tiny_a["via"] != rel.WITHIN_REWRITER)]
    assert set(reworded["language"]) == {"en"}
    assert reworded.groupby("via").size().to_dict() == {"de": 4, "ja": 3}
    assert "gp_901/en~de-s0" in set(reworded["item_id"])
    assert reworded["category"].notna().all() and set(reworded["source"]) == {"written", "stereoset", "bbq"}
    assert released.english_mismatches.empty and released.score_mismatches.empty


def test_within_language_rewordings_become_rewordings_in_their_language(released):
    """tiny-a_within_language.csv, by hand: its rw_target rows are Spanish rewordings of gp_901, ss_9001 (stored
    swapped), bbq_Age_901 (dropped with its item) and bbq_Age_900; its nocontext row is not read."""
    within = released.scores.loc[released.scores["via"] == rel.WITHIN_REWRITER].set_index("item_id")
    assert sorted(within.index) == ["bbq_Age_900/es~aya-expanse-32b", "gp_901/es~aya-expanse-32b",
                                    "ss_9001/es~aya-expanse-32b"]
    assert set(within["variant"]) == {"rewording"} and set(within["model"]) == {"tiny-a"}
    swapped = within.loc["ss_9001/es~aya-expanse-32b"]
    assert (swapped["lp_mean_stereotyped"], swapped["lp_mean_anti_stereotyped"]) == (-2.1, -2.6)
    assert within["stereotyped"].isna().all(), "its own texts are not in prompts.json: none shown"
    # Within-language carry-over pairs each with its Spanish translation: gp_901 0.574443 -> sigmoid(0.6), ss_9001
    # (translation swapped too: -2.4 against -2.2) sigmoid(-0.2) -> sigmoid(0.5); bbq_Age_900's translation collapsed.
    pairs = analyses.carry_over_pairs(released.scores)
    pairs = pairs.loc[pairs["change"] == "within-language rewording"].set_index("base_id")
    assert sorted(pairs.index) == ["gp_901", "ss_9001"]
    assert pairs.loc["gp_901", "before"] == pytest.approx(0.574443, abs=1e-6)
    assert pairs.loc["ss_9001", ["before", "after"]].tolist() == pytest.approx([0.450166, 0.622459], abs=1e-6)


def test_texts_come_from_prompts_json_but_a_rewording_keeps_none_of_its_originals(tmp_path):
    """prompts.json names a version by its prompt id, and so do the score files, except that a rewording is named
    by the version it rewords: it must not be shown with that version's texts (which would also count every field
    as returned unchanged)."""
    folder = _copy_fixtures(tmp_path)
    shutil.copy(FIXTURES.parent / "paper" / "prompts.json", folder / "prompts.json")
    scores = rel.read_released(folder)
    translated = _row(scores, "tiny-a", "gp_901/es")
    assert isinstance(translated["stereotyped"], str) and translated["stereotyped"]
    reworded = scores.loc[scores["variant"] == "rewording"]
    assert len(reworded) and reworded[["stereotyped", "anti_stereotyped", "third"]].isna().all().all()


def test_layer_b_only_on_request():
    with_b = rel.read_released(FIXTURES, layer_b=True)
    probe = _row(with_b, "tiny-a", "cn_hi_900/hi")
    assert (probe["variant"], probe["via"], probe["dimension"]) == ("translation", "native", "caste")
    pairs = analyses.paired_with_english(analyses.item_scores(with_b))
    assert "cn_hi_900" not in set(pairs["base_id"]), "a native probe has no English partner"


def test_models_filter_and_single_file():
    only_b = rel.read_released(FIXTURES, models=["tiny-b"])
    assert set(only_b["model"]) == {"tiny-b"} and not (only_b["variant"] == "rewording").any()
    one_file = rel.read_released(FIXTURES / "tiny-b_checkpoint.csv")
    assert set(one_file["model"]) == {"tiny-b"}, "another model's noise file does not come along"
    pd.testing.assert_frame_equal(one_file, only_b)
    with_noise = rel.read_released(FIXTURES / "tiny-a_checkpoint.csv")
    assert set(with_noise["via"]) == {"human", "released", "de", "ja", rel.WITHIN_REWRITER}


def _copy_fixtures(tmp_path: Path) -> Path:
    folder = tmp_path / "released"
    shutil.copytree(FIXTURES, folder)
    return folder


def test_stored_score_check_reports_file_and_line(tmp_path):
    folder = _copy_fixtures(tmp_path)
    path = folder / "tiny-a_checkpoint.csv"
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    table.loc[3, "stereotype_score"] = "0.900000"  # CSV line 5
    table.to_csv(path, index=False)
    with pytest.warns(rel.ReleasedDataWarning, match="stereotype_score"):
        released = rel.load_released(folder)
    bad = released.score_mismatches
    assert len(bad) == 1
    assert (bad.iloc[0]["file"], bad.iloc[0]["line"], bad.iloc[0]["prompt_id"]) == ("tiny-a_checkpoint.csv", 5,
                                                                                   table.loc[3, "prompt_id"])
    assert bad.iloc[0]["recomputed"] == pytest.approx(expit(-2.5 + 2.0), abs=1e-6)


def test_english_copies_in_noise_file_are_checked(tmp_path):
    folder = _copy_fixtures(tmp_path)
    path = folder / "tiny-a_noise_floor.csv"
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    table.loc[0, "logprob_stereotype"] = "-1.400000"
    table.loc[0, "stereotype_score"] = f"{expit(-1.4 + 2.0):.6f}"
    table.to_csv(path, index=False)
    with pytest.warns(rel.ReleasedDataWarning, match="English original"):
        released = rel.load_released(folder)
    assert released.english_mismatches[["model", "base_id", "line"]].to_dict("records") == [
        {"model": "tiny-a", "base_id": "gp_901", "line": 2}]
    assert _row(released.scores, "tiny-a", "gp_901/en")["lp_mean_stereotyped"] == -1.5, "the item file's row is kept"


def test_clear_errors(tmp_path):
    folder = _copy_fixtures(tmp_path)
    (folder / "label_fix.json").unlink()
    with pytest.raises(release_files.ReleasedDataError, match=r"label_fix\.json.*raw\.githubusercontent\.com"):
        rel.read_released(folder)
    assert len(rel.read_released(folder, fix_labels=False))
    table = pd.read_csv(folder / "tiny-b_checkpoint.csv").drop(columns=["logprob_unrelated"])
    table.to_csv(folder / "tiny-b_checkpoint.csv", index=False)
    with pytest.raises(release_files.ReleasedDataError, match=r"tiny-b_checkpoint\.csv.*logprob_unrelated"):
        rel.read_released(folder, fix_labels=False)
    with pytest.raises(release_files.ReleasedDataError, match="no released score files"):
        rel.read_released(tmp_path / "released" / "..", fix_labels=False)
    with pytest.raises(release_files.ReleasedDataError, match="no such"):
        rel.read_released(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="ISO 639-1"):
        rel.iso_language("english")


def test_language_and_category_mapping():
    assert [rel.iso_language(c) for c in ("en", "zh-CN", "pt_BR", "SW")] == ["en", "zh", "pt", "sw"]
    assert rel.source_dimension_category("stereoset_profession") == ("stereoset", "profession", "profession")
    assert rel.source_dimension_category("bbq_Gender_identity") == ("bbq", "gender", "Gender_identity")
    assert rel.source_dimension_category("age_competence") == ("written", "age", "age_competence")
    assert rel.source_dimension_category("regional_stereotype") == ("written", "region", "regional_stereotype")


def test_import_released_writes_a_run_every_chapter_can_read(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path / "runs"))
    scores = import_released("released-test", FIXTURES)
    folder = tmp_path / "runs" / "released-test"
    assert {p.name for p in folder.iterdir()} >= {"items.parquet", "scores", "collapsed.parquet",
                                                  "released.json"}
    report = json.loads((folder / "released.json").read_text())
    assert report["collapsed"] == 3 and report["english_bases"] == 4 and report["fix_labels"] is True
    read_back = pipeline.read_scores("released-test")

    def plain(table: pd.DataFrame) -> pd.DataFrame:  # missing texts read back as NaN or None alike
        table = table.sort_values(["model", "item_id"])  # read_scores orders by model, then item
        return table.astype(object).where(table.notna(), None).reset_index(drop=True)

    pd.testing.assert_frame_equal(plain(read_back), plain(scores[read_back.columns]))
    items = pd.read_parquet(folder / "items.parquet")
    assert items["item_id"].is_unique and list(items.columns) == ITEM_COLUMNS
    # A hand-worked drop: tiny-a, Spanish, soft scores on the three paired bases.
    english = {"gp_901": expit(-1.5 + 2.0), "ss_9001": expit(-2.0 + 2.5), "bbq_Race_ethnicity_900": expit(-1.0 + 2.0)}
    spanish = {"gp_901": expit(-1.8 + 2.1), "ss_9001": expit(-2.4 + 2.2), "bbq_Race_ethnicity_900": expit(-1.5 + 1.8)}
    cells = analyses.cell_tests(read_back, options=StudyOptions(n_permutations=100, seed=0))
    es = cells.loc[(cells["model"] == "tiny-a") & (cells["language"] == "es")].iloc[0]
    assert es["n"] == 3
    assert es["drop"] == pytest.approx(np.mean([english[b] - spanish[b] for b in english]), abs=1e-12)
    assert len(analyses.floor_cells(read_back, options=StudyOptions(n_permutations=100, seed=0))) == 2


class _FakeResponse(stdio.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _serve_fixtures(url: str, timeout: float = 0):
    name = url.rsplit("/", 1)[1]
    path = FIXTURES / name
    if not path.exists():  # the paper's items are fixtures of their own
        path = FIXTURES.parent / "paper" / name
    if not path.exists():  # a model's within-language rewordings are <model>.csv in the repository
        path = FIXTURES / name.replace(".csv", release_files.WITHIN_LANGUAGE_SUFFIX)
    if not path.exists():
        raise urllib.error.HTTPError(url, 404, "not found", {}, None)
    return _FakeResponse(path.read_bytes())


def test_fetch_verifies_hashes_and_records_unpinned_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(downloads.urllib.request, "urlopen", _serve_fixtures)
    monkeypatch.setattr(release_files, "RELEASED_MODELS", ("tiny-a",))
    pinned = {"label_fix.json": downloads.sha256_of(FIXTURES / "label_fix.json")}
    monkeypatch.setattr(release_files, "KNOWN_SHA256", pinned)
    folder = tmp_path / "cache"
    with pytest.warns(downloads.DownloadWarning, match="no pinned sha256"):
        release_files.fetch_released(["tiny-a"], folder=folder, with_paper_results=False)
    assert (folder / "tiny-a_checkpoint.csv").read_bytes() == (FIXTURES / "tiny-a_checkpoint.csv").read_bytes()
    first_seen = json.loads((folder / downloads.FIRST_SEEN_HASHES).read_text())
    # every file without a pinned hash: the model's four, the inputs beside the scores, the paper's items
    assert set(first_seen) == {"tiny-a_checkpoint.csv", "tiny-a_noise_floor.csv", "tiny-a_noise_floor_llm.csv",
                               "tiny-a_within_language.csv",
                               "validation_results.json", "contrast_judgment_full.csv", "token_counts.csv",
                               "prompts.json", "noise_floor_paraphrases.json"}
    # A second fetch finds everything verified and downloads nothing.
    monkeypatch.setattr(downloads.urllib.request, "urlopen", lambda *a, **k: pytest.fail("downloaded again"))
    release_files.fetch_released(["tiny-a"], folder=folder, with_paper_results=False)
    # A file that no longer matches its recorded hash is fetched again, and a wrong pin is refused.
    (folder / "tiny-a_checkpoint.csv").write_text("tampered")
    monkeypatch.setattr(release_files, "KNOWN_SHA256", {**pinned, "tiny-a_checkpoint.csv": "0" * 64})
    monkeypatch.setattr(downloads.urllib.request, "urlopen", _serve_fixtures)
    with pytest.raises(release_files.ReleasedDataError, match="does not match the pinned"):
        release_files.fetch_released(["tiny-a"], folder=folder, with_paper_results=False)
    assert not list(folder.glob("*.part"))


def test_offline_download_says_what_to_fetch_and_where(tmp_path, monkeypatch):
    def offline(url, timeout=0):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(downloads.urllib.request, "urlopen", offline)
    monkeypatch.setenv("BIASAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(release_files.ReleasedDataError) as err:
        import_released("offline", "download", models=["llama3.1-8b"])
    message = str(err.value)
    folder = tmp_path / "cache" / "released" / release_files.RESULTS_COMMIT[:12]
    assert str(folder) in message and "name resolution" in message
    assert (f"https://raw.githubusercontent.com/HarshKumar3014/MultiLLMs/{release_files.RESULTS_COMMIT}/"
            "MultilingualBiasAudit/results/v2/llama3.1-8b_checkpoint.csv") in message
    assert f"{release_files.LABEL_FIX_COMMIT}/MultilingualBiasAudit/data/label_fix.json" in message
    with pytest.raises(ValueError, match="unknown released model"):
        release_files.released_files(["gpt-9"])


def test_released_file_urls_are_pinned():
    files = {f.name: f for f in release_files.released_files()}
    # per model: item scores, noise floor, LLM rewordings, within-language rewordings; the label fix; three
    # inputs; the items and their rewordings; thirteen result files
    assert len(files) == 4 * len(release_files.RELEASED_MODELS) + 1 + 3 + 2 + 13
    # the within-language rewordings of three models are in one folder of the repository, the other seven's in another
    assert files["llama3.1-8b_within_language.csv"].url.endswith(
        "15ba4228060bcf9aee5f95e98437bed3ebc09af5/MultilingualBiasAudit/results/v2/within_language_runs/llama3.1-8b.csv")
    assert files["solar-10.7b_within_language.csv"].url.endswith(
        "509680d7b5b59ea07d32422df5e6551d1f041872/MultilingualBiasAudit/results/v2/review_runs/solar-10.7b.csv")
    assert files["prompts.json"].url.endswith("2cef8ea47da434c6583f6799b6f45965ef9a123a/MultilingualBiasAudit/"
                                              "data/prompts.json")
    assert files["noise_floor_paraphrases.json"].commit == "d08d460e547d712c05986b4cace52d868e35705a"
    assert files["spike_in_null_200.csv"].url == ("https://raw.githubusercontent.com/HarshKumar3014/MultiLLMs/"
                                                  "19ed3cd149a710bd4816a6b5d4dfba03c7370290/MultilingualBiasAudit/"
                                                  "results/reanalysis/spike_in_null_200.csv")
    assert all(len(f.commit) == 40 for f in files.values())
    assert files["label_fix.json"].sha256 == "911344c04f393cb64a3001cd307ac9b8ae68360eecc88b2349c911004ef0b6bd"


# --------------------------------------------------------------------------------------------
# Integration: the paper's own per-cell results for Llama-3.1-8B
# --------------------------------------------------------------------------------------------


RELEASED_FILES = ("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv", "label_fix.json",
                  "cell_tests.csv", "floor_tests.csv", "pipeline_ablation.csv")
N_PERMUTATIONS = 20_000  # the paper's


def _mc_close(ours: np.ndarray, theirs: np.ndarray, b: int) -> np.ndarray:
    """|ours - theirs| within 4.5 standard errors of two independent Monte Carlo p-values."""
    p = np.clip((ours + theirs) / 2, 1 / b, 1 - 1 / b)
    return np.abs(ours - theirs) <= 4.5 * np.sqrt(2 * p * (1 - p) / b) + 2 / b


@pytest.mark.mirror(*RELEASED_FILES)
def test_reproduces_llama_cell_and_floor_tests(mirror: Path):
    release = mirror
    released = rel.load_released(release, models=["llama3.1-8b"])
    assert released.summary["english_bases"] == 362
    assert released.score_mismatches.empty and released.english_mismatches.empty
    scores = released.scores

    paper = pd.read_csv(release / "cell_tests.csv")
    paper = paper.loc[paper["model"] == "llama3.1-8b"].assign(language=lambda t: t["language"].map(rel.iso_language))
    cells = analyses.cell_tests(scores, options=StudyOptions(n_permutations=N_PERMUTATIONS, seed=DEFAULT_SEED))
    both = cells.merge(paper, on=["model", "language"], validate="one_to_one")
    assert len(both) == 7
    assert both["n_x"].tolist() == both["n_y"].tolist()
    assert dict(zip(both["language"], both["n_x"]))["es"] == 349
    np.testing.assert_allclose(both["drop"], -both["mean_d"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(both["drop_binary"], -both["mean_d_bin"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(both["sd"], both["sigma_d"], rtol=1e-9)
    np.testing.assert_allclose(both["noise_only"], both["analytic_null"], rtol=1e-9)
    assert _mc_close(both["p"].to_numpy(), both["p_perm"].to_numpy(), N_PERMUTATIONS).all(), both[["p", "p_perm"]]
    assert _mc_close(both["p_binary"].to_numpy(), both["p_perm_bin"].to_numpy(), N_PERMUTATIONS).all()

    paper_floor = pd.read_csv(release / "floor_tests.csv")
    paper_floor = paper_floor.loc[paper_floor["model"] == "llama3.1-8b"]
    floors = analyses.floor_cells(scores, options=StudyOptions(n_permutations=N_PERMUTATIONS, seed=DEFAULT_SEED))
    both = floors.merge(paper_floor, left_on=["model", "via"], right_on=["model", "pivot"], validate="one_to_one")
    assert len(both) == 3
    assert both["n_x"].tolist() == both["n_y"].tolist() == [361, 346, 359]
    np.testing.assert_allclose(both["drop"], -both["mean_d"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(both["floor_x"], both["floor_y"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(both["floor_binary"], both["floor_bin"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(both["noise_only"], both["analytic_null"], rtol=1e-9)
    assert _mc_close(both["p"].to_numpy(), both["p_perm"].to_numpy(), N_PERMUTATIONS).all(), both[["p", "p_perm"]]


@pytest.mark.mirror(*RELEASED_FILES)
def test_raw_labels_give_the_papers_raw_english_score(mirror: Path):
    release = mirror
    # The paper's pipeline ablation (v2 scorer): English soft 0.490 raw over 387 bases, 0.536 fixed.
    ablation = pd.read_csv(release / "pipeline_ablation.csv").set_index(["scorer", "labels"])
    for fix, labels in ((False, "raw"), (True, "fixed")):
        scores = rel.read_released(release, fix_labels=fix)
        english = analyses.item_scores(scores).query("variant == 'original'")
        assert english["soft"].mean() == pytest.approx(ablation.loc[("v2", labels), "en_ss"], abs=0.01)
