"""The paper's own items as an item bank: read from files in the release's formats (made up here), and from
the mirror's copy of its prompts.json against the paper's own counts and its released scores."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from biasaudit.data.release_files import ReleasedDataError
from biasaudit.data.release_items import paper_form, paper_items, rewording_sameness
from biasaudit.data.released import load_released, released_models_in

FIXTURES = Path(__file__).parent / "fixtures" / "paper"


def test_the_papers_rule_for_one_text_sets_aside_case_punctuation_and_spaces():
    assert paper_form("El anciano.") == paper_form("el  anciano") == "elanciano"
    assert paper_form("लड़की") != paper_form("लड़का"), "vowel signs still tell two words apart"
    assert paper_form("ＡＢＣ") == "abc", "NFKC first"


def test_the_paper_bank_with_its_label_fix_and_rewordings():
    items, collapsed = paper_items(FIXTURES / "prompts.json", FIXTURES / "label_fix.json",
                                   FIXTURES / "noise_floor_paraphrases.json")
    by = items.set_index("item_id")
    # version ids as in the released score files; layer B and the unrecoverable BBQ item left out
    assert set(by.index) == {"gp_901/en", "gp_901/es", "gp_901/zh", "ss_9001/en", "ss_9001/es", "ss_9001/zh",
                             "bbq_Age_900/en", "bbq_Age_900/zh", "bbq_Race_ethnicity_900/en", "gp_901/en~de-s0",
                             "ss_9001/en~de-s0"}
    # the label fix: StereoSet's stored columns swapped back; a three-way permutation undone
    assert by.loc["ss_9001/en", ["stereotyped", "anti_stereotyped"]].tolist() == ["The man was strong.",
                                                                                  "The man was weak."]
    assert by.loc["ss_9001/en~de-s0", "stereotyped"] == "The man was powerful."
    # (the map: the stereotype is stored as "anti_stereotype", the anti-stereotype as "unrelated", the unknown
    # answer as "stereotype")
    assert by.loc["bbq_Race_ethnicity_900/en", ["stereotyped", "anti_stereotyped", "third"]].tolist() == [
        "The White man.", "The Black man.", "Unknown."]
    assert by.loc["gp_901/es", ["source", "dimension", "category", "via"]].tolist() == [
        "written", "gender", "gender_profession", "released"]
    assert by.loc["bbq_Age_900/en", "third_kind"] == "unknown" and by.loc["gp_901/en~de-s0", "variant"] == "rewording"
    # set aside by the paper's rule: a translation and a rewording whose two continuations are one text
    assert sorted(collapsed["item_id"]) == ["bbq_Age_900/es", "gp_901/en~ja-s1"]


def test_a_broken_record_is_named(tmp_path):
    records = json.loads((FIXTURES / "prompts.json").read_text(encoding="utf-8"))
    del records[4]["stereotype"]
    (tmp_path / "prompts.json").write_text(json.dumps(records), encoding="utf-8")
    # ss_9001's anti-stereotype is stored as "stereotype" (the label fix swaps them): that field is named
    with pytest.raises(ReleasedDataError, match=r"record 4 \('ss_9001_es'\): field 'stereotype' is missing"):
        paper_items(tmp_path / "prompts.json", FIXTURES / "label_fix.json")


ZERO_WIDTH = re.compile("[\u200b-\u200d\ufeff]")


def _same_text(a: str, b: str) -> bool:
    """Equal once zero-width characters and no-break spaces (a transcribed copy may lack them) are set aside."""
    def plain(text: str) -> str:
        return ZERO_WIDTH.sub("", str(text)).replace("\u00a0", " ").replace("\u202f", " ").strip()
    return plain(a) == plain(b)


@pytest.mark.mirror("released", "prompts.json", "label_fix.json", "paper_numbers.json", "llama3.1-8b_checkpoint.csv",
                    "llama3.1-8b_noise_floor.csv")
def test_the_papers_items_as_built_here_are_its_versions(mirror):
    items, collapsed = paper_items(mirror / "prompts.json", mirror / "label_fix.json")
    numbers = json.loads((mirror / "paper_numbers.json").read_text())
    # the paper's own counts: 362 English items, the collapsed translations per language
    assert items.loc[items["variant"] == "original", "base_id"].nunique() == numbers["n_probes_en"] == 362
    per_language = collapsed["language"].value_counts().to_dict()
    assert per_language == {("zh" if k == "zh-CN" else k): v for k, v in numbers["collapsed"]["audit_by_language"].items()}
    assert len(items.loc[items["variant"] == "translation"]) == 2497, "the translated versions the paper keeps"
    assert items.groupby("source")["base_id"].nunique().to_dict() == {
        "stereoset": numbers["n_by_source"]["stereoset"], "bbq": numbers["n_by_source"]["bbq"],
        "written": numbers["n_by_source"]["handcrafted"]}
    # every version of the released scores (every model's files the mirror holds: at least Llama-3.1-8B's) is a
    # version of the bank, with the same context
    bank = pd.concat([items, collapsed]).set_index("item_id")
    released = load_released(mirror, models=released_models_in(mirror), drop_collapsed=False).scores
    released = released.loc[released["variant"] != "rewording"]
    assert set(released["item_id"]) <= set(bank.index)
    differ = [i for i, context in zip(released["item_id"], released["context"])
              if not _same_text(context, bank.loc[i, "context"])]
    assert not differ, differ[:5]


def test_the_papers_same_column_counts_three_fields_as_stored_over_every_rewording():
    """Table 3's "Same", worked by hand on the fixture: via de, three English prompts are reworded (bbq_Age_901
    too, which the label fix drops: the paper's count keeps it); of their 9 fields, bbq_Age_901's two options came
    back unchanged (its third option, unchanged too, is not counted): 2/9. Via ja, gp_901's 3 fields all changed."""
    same = rewording_sameness(FIXTURES / "prompts.json", FIXTURES / "noise_floor_paraphrases.json")
    assert same.set_index("pivot").to_dict("index") == {"de": {"n_fields": 9, "share_unchanged": pytest.approx(2 / 9)},
                                                        "ja": {"n_fields": 3, "share_unchanged": 0.0}}
