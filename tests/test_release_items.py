"""The paper's own items as an item bank: read from files in the release's formats (made up here), and from
the mirror's copy of its prompts.json against the paper's own counts and its released scores."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from biasaudit.data.release_files import ReleasedDataError
from biasaudit.data.release_items import paper_form, paper_items, rewording_fields, rewording_sameness
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


# The fields of the fixture's rewordings beside their originals, by hand: the label fix puts each option under its
# role (ss_9001's stored columns are swapped) and leaves bbq_Age_901 out with its rewording.
REWORDED_FIELDS = [
    ("de", "gp_901_en", "context", "Context of gp_901 in en.", "Reworded context of gp_901."),
    ("de", "gp_901_en", "stereotype", "She was tired.", "She was worn out."),
    ("de", "gp_901_en", "anti_stereotype", "He was tired.", "He was worn out."),
    ("de", "ss_9001_en", "context", "Context of ss_9001 in en.", "Reworded context of ss_9001."),
    ("de", "ss_9001_en", "stereotype", "The man was strong.", "The man was powerful."),
    ("de", "ss_9001_en", "anti_stereotype", "The man was weak.", "The man was weak."),
    ("ja", "gp_901_en", "context", "Context of gp_901 in en.", "Another rewording of gp_901."),
    ("ja", "gp_901_en", "stereotype", "She was tired.", "She is tired."),
    ("ja", "gp_901_en", "anti_stereotype", "He was tired.", "She is tired."),
]


def test_the_papers_same_column_counts_three_fields_of_the_items_it_keeps():
    """Table 3's "Same", worked by hand on the fixture: the paper compares the label-fixed fields of the items it
    keeps (via de: gp_901 and ss_9001, 6 fields, of which ss_9001's anti-stereotype came back unchanged: 1/6; its
    counts, e.g. 28% = 301 of 1,086 fields via German, fit its 362 items, not the 387 reworded); via ja,
    gp_901's 3 fields all changed."""
    fields = rewording_fields(FIXTURES / "prompts.json", FIXTURES / "noise_floor_paraphrases.json",
                              FIXTURES / "label_fix.json")
    assert list(fields.itertuples(index=False, name=None)) == REWORDED_FIELDS
    same = rewording_sameness(fields)
    assert same.set_index("pivot").to_dict("index") == {"de": {"n_fields": 6, "share_unchanged": pytest.approx(1 / 6)},
                                                        "ja": {"n_fields": 3, "share_unchanged": 0.0}}


def test_the_papers_similarity_column_averages_each_fields_cosine_with_its_original():
    """Table 3's "Sim." on the fixture with a made-up embedder (letter counts): per route and field the mean cosine
    of the hand-listed pairs, and per route over its fields."""
    import numpy as np
    from biasaudit.book.chapters.noise_floor import similarity_by_route
    from biasaudit.translate.judge import Embedder

    class Letters(Embedder):
        name = "letters"

        def _embed_batch(self, texts):
            counts = np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz0123456789"] for t in texts],
                              dtype=np.float32)
            return counts / np.linalg.norm(counts, axis=1, keepdims=True)

    def cosine(a: str, b: str) -> float:
        u, v = Letters(cache=False).embed([a, b])
        return float(u @ v)

    fields = rewording_fields(FIXTURES / "prompts.json", FIXTURES / "noise_floor_paraphrases.json",
                              FIXTURES / "label_fix.json")
    table = similarity_by_route(fields, Letters(cache=False)).set_index(["pivot", "field"])
    for pivot in ("de", "ja"):
        mine = [(field, cosine(original, reworded)) for p, _, field, original, reworded in REWORDED_FIELDS if p == pivot]
        for field in ("context", "stereotype", "anti_stereotype"):
            expected = np.mean([c for f, c in mine if f == field])
            assert table.loc[(pivot, field), "similarity"] == pytest.approx(expected)
        assert table.loc[(pivot, "all"), "similarity"] == pytest.approx(np.mean([c for _, c in mine]))
        assert table.loc[(pivot, "all"), "n_fields"] == len(mine)
    assert table.loc[("de", "anti_stereotype"), "similarity"] < 1, "gp_901's changed; ss_9001's came back as it was"


def test_chapter_11_says_why_it_has_no_similarity(monkeypatch):
    from biasaudit.book.chapters import noise_floor

    fields = pd.DataFrame({"pivot": ["de"], "prompt_id": ["x_en"], "field": ["context"], "original": ["a"],
                           "reworded": ["b"]})
    assert noise_floor.rewording_similarity(None, "any")[1].startswith("needs the release's rewording texts")
    assert noise_floor.rewording_similarity(fields, "")[1].startswith("needs rewording_embedder")

    def offline(name):
        raise OSError(f"cannot reach the hub for {name}")

    monkeypatch.setattr(noise_floor, "load_embedder", offline)
    similarity, why = noise_floor.rewording_similarity(fields, "sentence-transformers/all-MiniLM-L6-v2")
    assert similarity is None and why == ("could not load sentence-transformers/all-MiniLM-L6-v2 (cannot reach the "
                                          "hub for sentence-transformers/all-MiniLM-L6-v2)")
