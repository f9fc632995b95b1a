"""The release's inputs beside the scores (validation results, contrast judgments, token counts): read
from fixtures written here in the release's own formats, and from the mirror's copies against the
paper's own published counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from biasaudit.data import release_inputs
from biasaudit.data.release_files import ReleasedDataError
from biasaudit.data.released import read_released

FIXTURES = Path(__file__).parent / "fixtures" / "released"


def test_a_release_prompt_id_is_a_version_of_this_project():
    assert release_inputs.version_id("ss_1733_zh-CN") == ("ss_1733/zh", "ss_1733", "zh")
    assert release_inputs.version_id("bbq_Gender_identity_000_hi") == ("bbq_Gender_identity_000/hi",
                                                                       "bbq_Gender_identity_000", "hi")
    with pytest.raises(ValueError, match="no two-letter"):
        release_inputs.version_id("gp_001_english")


def test_validation_results_are_read_per_version():
    table = release_inputs.read_validation(FIXTURES / "validation_results.json").set_index("item_id")
    assert list(table.index) == ["gp_901/es", "gp_901/zh", "ss_9001/es", "ss_9001/zh", "bbq_Age_900/zh"]
    assert table.loc["gp_901/zh", "similarity"] == 0.7031 and not table.loc["gp_901/zh", "passed"]
    assert table.loc["ss_9001/zh", "back_translated"] == "The setting of ss_9001." and table["passed"].sum() == 4


@pytest.mark.parametrize("entry, field", [({"similarity": 1.4, "passed": True}, "'similarity'"),
                                          ({"similarity": 0.9, "passed": "yes"}, "'passed'"),
                                          ({"similarity": 0.9}, "lacks")])
def test_a_bad_validation_entry_is_named(tmp_path, entry, field):
    path = tmp_path / "validation_results.json"
    path.write_text(json.dumps({"gp_001_fr": {"similarity": 0.9, "passed": True}, "gp_002_fr": entry}))
    with pytest.raises(ReleasedDataError, match=rf"validation_results.json: entry 'gp_002_fr'.*{field}"):
        release_inputs.read_validation(path)


def test_contrast_judgments_are_read_per_version_and_checked():
    table = release_inputs.read_contrast_judgments(FIXTURES / "contrast_judgment_full.csv")
    assert table.set_index("item_id")["judgment"].to_dict() == {
        "gp_901/es": "preserved", "gp_901/zh": "preserved", "ss_9001/es": "partly", "ss_9001/zh": "lost",
        "bbq_Age_900/zh": "preserved"}
    assert table["source"].tolist()[:3] == ["handcrafted", "handcrafted", "stereoset"]


def test_an_unknown_judgment_names_its_row(tmp_path):
    text = (FIXTURES / "contrast_judgment_full.csv").read_text(encoding="utf-8").replace(",lost,", ",gone,")
    (tmp_path / "contrast_judgment_full.csv").write_text(text, encoding="utf-8")
    with pytest.raises(ReleasedDataError, match=r"row 5, field 'judgment': 'gone'"):
        release_inputs.read_contrast_judgments(tmp_path / "contrast_judgment_full.csv")


def test_token_counts_make_the_released_means_into_sums():
    counts = release_inputs.read_token_counts(FIXTURES / "token_counts.csv")
    assert counts.loc[counts["item_id"] == "gp_901/es", ["ntok_stereotyped", "ntok_anti_stereotyped"]].values.tolist() \
        == [[5, 6]]
    scores = read_released(FIXTURES, models=["tiny-a"])
    summed = release_inputs.with_token_counts(scores, counts).set_index("item_id")
    # gp_901/es stores -1.8 and -2.1 per token (not in the label map: kept as stored) over 5 and 6 tokens
    assert summed.loc["gp_901/es", "lp_sum_stereotyped"] == pytest.approx(-9.0)
    assert summed.loc["gp_901/es", "lp_sum_anti_stereotyped"] == pytest.approx(-12.6)
    # ss_9001/en: the label fix swaps the stored columns (-2.5, -2.0); the counts belong to the fixed roles
    assert summed.loc["ss_9001/en", "lp_sum_stereotyped"] == pytest.approx(-2.0 * 2)
    assert np.isnan(summed.loc["gp_901/en~de-s0", "lp_sum_stereotyped"]), "no count: no sum"


def test_a_bad_token_count_names_its_row(tmp_path):
    text = (FIXTURES / "token_counts.csv").read_text().replace("tiny-a,ss_9001_es,2,2", "tiny-a,ss_9001_es,2,0")
    (tmp_path / "token_counts.csv").write_text(text)
    with pytest.raises(ReleasedDataError, match=r"row 6, field 'n_anti_stereotype': '0' is not a token count"):
        release_inputs.read_token_counts(tmp_path / "token_counts.csv")


@pytest.mark.mirror("released", "contrast_judgment_full.csv", "translation_quality.json")
def test_the_mirrors_contrast_judgments_give_the_papers_counts(mirror):
    table = release_inputs.read_contrast_judgments(mirror / "contrast_judgment_full.csv")
    published = json.loads((mirror / "translation_quality.json").read_text())["judgments"]
    counts = table.groupby(["language", "judgment"]).size()
    for language, judged in published["by_lang"].items():
        code = "zh" if language == "zh-CN" else language
        for judgment, n in judged.items():
            assert counts.get((code, judgment), 0) == n, (language, judgment)
    assert table["judgment"].value_counts().to_dict() == published["total"]


@pytest.mark.mirror("released", "token_counts.csv", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv",
                    "label_fix.json")
def test_the_mirrors_token_counts_cover_every_kept_version(mirror):
    counts = release_inputs.read_token_counts(mirror / "token_counts.csv")
    assert counts["model"].nunique() == 10 and len(counts) == 10 * 2896
    scores = read_released(mirror, models=["llama3.1-8b"])
    kept = scores.loc[scores["variant"] != "rewording"]
    summed = release_inputs.with_token_counts(kept, counts)
    assert summed["ntok_stereotyped"].notna().all(), "every kept item version has its token counts"
    ratio = summed["lp_sum_stereotyped"] / summed["lp_mean_stereotyped"]
    assert np.allclose(ratio, summed["ntok_stereotyped"])
    assert pd.Series(summed["ntok_stereotyped"]).between(1, 200).all()
