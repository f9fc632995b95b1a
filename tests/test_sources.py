"""Tests of the StereoSet and BBQ loaders: unit tests on invented fixtures in each real format,
integration tests on the mirror (marked `mirror`, run when BIASAUDIT_DATA_DIR is set)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import types
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from biasaudit.data.bbq import (
    EXCLUDED_NO_GROUPS,
    EXCLUDED_NO_MATCH,
    EXCLUDED_NO_UNKNOWN,
    EXCLUDED_SEVERAL_UNKNOWN,
    EXCLUDED_TWO_MATCHES,
    MissingCategoryWarning,
    load_bbq,
    normalise_group,
)
from biasaudit.data.item_table import ITEM_COLUMNS, join_text, validate_items
from biasaudit.data.public import STAGE_COLUMNS, SourceDataError
from biasaudit.data.stereoset import (
    EXCLUDED_INSIDE_WORD,
    EXCLUDED_NOT_MATCHING,
    EXCLUDED_TWO_BLANKS,
    HANDLED_AFTER_PUNCTUATION,
    HANDLED_WORD_ENDING,
    load_stereoset,
    read_hf_rows_json,
    read_original_file,
    stereoset_items,
)

FIXTURES = Path(__file__).parent / "fixtures"
HF_JSON = "stereoset_hf_by_label.json"
JSONL = "intrasentence_dev.reconstructed.jsonl"
DEV_JSON = "dev.json"
MIRROR_CATEGORIES = ["Age", "Disability_status", "Gender_identity", "Nationality", "Physical_appearance",
                     "Religion", "Sexual_orientation"]


def stereoset_dir(tmp_path: Path, *names: str) -> Path:
    """A data folder whose stereoset/ holds the named fixture files."""
    folder = tmp_path / "data"
    (folder / "stereoset").mkdir(parents=True)
    for name in names:
        shutil.copy(FIXTURES / "stereoset" / name, folder / "stereoset" / name)
    return folder


def bbq_dir(tmp_path: Path) -> Path:
    """A data folder whose bbq/ holds every BBQ fixture file."""
    folder = tmp_path / "data"
    shutil.copytree(FIXTURES / "bbq", folder / "bbq")
    return folder


def by_base(items: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Items keyed by base_id, for readable assertions."""
    return {row["base_id"]: row for row in items.to_dict(orient="records")}


def stage_n(stages: pd.DataFrame, category: str, stage: str, reason: str | None = None) -> int:
    """The count of one stage row (summed over reasons unless one is given)."""
    rows = stages[(stages["category"] == category) & (stages["stage"] == stage)]
    if reason is not None:
        rows = rows[rows["reason"] == reason]
    return int(rows["n"].sum())


def write(tmp_path: Path, name: str, text: str) -> Path:
    """A file with the given text, for the bad-input tests."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- StereoSet


def test_stereoset_hf_rows_give_contract_items(tmp_path: Path) -> None:
    items, stages = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=None)
    assert list(items.columns) == ITEM_COLUMNS
    validate_items(items)
    assert (items["source"] == "stereoset").all() and (items["variant"] == "original").all()
    assert (items["language"] == "en").all() and (items["via"] == "human").all()
    assert (items["third_kind"] == "unrelated").all()
    assert (items["dimension"] == items["category"]).all()
    rows = by_base(items)
    assert "ss-ix01" not in rows  # the intersentence item is not read
    aunt = rows["ss-fx01"]
    assert aunt["item_id"] == "ss-fx01/en"
    assert aunt["context"] == "My aunt is very"
    assert (aunt["stereotyped"], aunt["anti_stereotyped"], aunt["third"]) == (
        "chatty at parties.", "quiet at parties.", "cardboard at parties.")


def test_stereoset_blank_at_start_gives_empty_context(tmp_path: Path) -> None:
    items, _ = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=None)
    mothers = by_base(items)["ss-fx02"]
    assert mothers["context"] == ""
    assert mothers["stereotyped"] == "Mothers are the best cooks in the family."
    assert mothers["anti_stereotyped"] == "Fathers are the best cooks in the family."


def test_stereoset_context_comes_from_the_sentence_not_the_template(tmp_path: Path) -> None:
    items, _ = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=None)
    plumber = by_base(items)["ss-fx03"]
    assert plumber["context"] == "The plumber arrived"  # template: "the Plumber arrived BLANK ..."
    assert plumber["stereotyped"] == "late for the job."


def test_stereoset_context_and_continuation_rebuild_the_sentence(tmp_path: Path) -> None:
    items, _ = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=None)
    sentences = {}
    for label, entries in json.loads((FIXTURES / "stereoset" / HF_JSON).read_text()).items():
        for entry in entries:
            sentences[(entry["id"], label)] = entry["sentence"]
    for row in items.to_dict(orient="records"):
        item_id = row["base_id"].removeprefix("ss-")
        if item_id == "fx07":  # BLANK after a full stop: the scorer's space is added on purpose
            continue
        for role, label in [("stereotyped", "stereotype"), ("anti_stereotyped", "anti-stereotype"), ("third", "unrelated")]:
            assert row["context"] == row["context"].strip() and row[role] == row[role].strip()
            assert join_text(row["context"], row[role], "en") == sentences[(item_id, label)]


def test_stereoset_blank_cases_are_handled_or_excluded_and_counted(tmp_path: Path) -> None:
    items, stages = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=None)
    rows = by_base(items)
    chef = rows["ss-fx04"]  # "The chef BLANKed the soup."
    assert chef["context"] == "The chef"
    assert chef["stereotyped"] == "salted the soup." and chef["anti_stereotyped"] == "ignored the soup."
    priest = rows["ss-fx07"]  # "The priest spoke softly.BLANK"
    assert priest["context"] == "The priest spoke softly." and priest["stereotyped"] == "Kindly"
    for excluded in ("ss-fx05", "ss-fx06", "ss-fx10"):
        assert excluded not in rows
    assert stage_n(stages, "race", "excluded", EXCLUDED_TWO_BLANKS) == 1
    assert stage_n(stages, "race", "excluded", EXCLUDED_INSIDE_WORD) == 1
    assert stage_n(stages, "race", "excluded", EXCLUDED_NOT_MATCHING) == 1
    assert stage_n(stages, "profession", "handled", HANDLED_WORD_ENDING) == 1
    assert stage_n(stages, "religion", "handled", HANDLED_AFTER_PUNCTUATION) == 1


def test_stereoset_stage_table_adds_up(tmp_path: Path) -> None:
    _, stages = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=1)
    assert list(stages.columns) == STAGE_COLUMNS
    assert stages["n"].dtype == "int64"
    expected = {"gender": (3, 0, 3, 1), "profession": (2, 0, 2, 1), "race": (5, 3, 2, 1), "religion": (2, 0, 2, 1)}
    for category, (read, excluded, recovered, sampled) in expected.items():
        assert stage_n(stages, category, "read") == read
        assert stage_n(stages, category, "excluded") == excluded
        assert stage_n(stages, category, "recovered") == recovered == read - excluded
        assert stage_n(stages, category, "sampled") == sampled
    assert (stages.loc[stages["stage"] == "excluded", "reason"] != "").all()


@pytest.mark.parametrize("name", [JSONL, DEV_JSON])
def test_stereoset_string_label_readers_agree_with_hf_rows(tmp_path: Path, name: str) -> None:
    from_hf, stages_hf = load_stereoset(stereoset_dir(tmp_path / "hf", HF_JSON), per_category=None)
    from_strings, stages_strings = load_stereoset(stereoset_dir(tmp_path / "str", name), per_category=None)
    pd.testing.assert_frame_equal(from_hf, from_strings)
    pd.testing.assert_frame_equal(stages_hf, stages_strings)
    sample_hf, _ = load_stereoset(stereoset_dir(tmp_path / "hf2", HF_JSON), per_category=1, seed=7)
    sample_strings, _ = load_stereoset(stereoset_dir(tmp_path / "str2", name), per_category=1, seed=7)
    pd.testing.assert_frame_equal(sample_hf, sample_strings)


def test_stereoset_prefers_hf_rows_when_both_files_are_there(tmp_path: Path) -> None:
    _, stages = load_stereoset(stereoset_dir(tmp_path, JSONL, HF_JSON), per_category=None)
    assert stages.attrs["origin"].endswith(HF_JSON)


@pytest.mark.parametrize("name", [HF_JSON, JSONL])
def test_stereoset_label_map_error_swaps_stereotype_and_anti(tmp_path: Path, name: str) -> None:
    right, stages_right = load_stereoset(stereoset_dir(tmp_path / "a", name), per_category=None)
    wrong, stages_wrong = load_stereoset(stereoset_dir(tmp_path / "b", name), per_category=None, stereoset_label_map=True)
    assert list(right["item_id"]) == list(wrong["item_id"])
    assert list(right["stereotyped"]) == list(wrong["anti_stereotyped"])
    assert list(right["anti_stereotyped"]) == list(wrong["stereotyped"])
    assert list(right["third"]) == list(wrong["third"])
    pd.testing.assert_frame_equal(stages_right, stages_wrong)


def test_stereoset_sample_is_seeded(tmp_path: Path) -> None:
    folder = stereoset_dir(tmp_path, HF_JSON)
    everything, _ = load_stereoset(folder, per_category=None)
    first, _ = load_stereoset(folder, per_category=1, seed=3)
    again, _ = load_stereoset(folder, per_category=1, seed=3)
    pd.testing.assert_frame_equal(first, again)
    assert first.groupby("category").size().to_dict() == {"gender": 1, "profession": 1, "race": 1, "religion": 1}
    assert set(first["item_id"]) <= set(everything["item_id"])
    draws = {tuple(load_stereoset(folder, per_category=1, seed=s)[0]["item_id"]) for s in range(12)}
    assert len(draws) > 1
    none, stages = load_stereoset(folder, per_category=0)
    assert none.empty and list(none.columns) == ITEM_COLUMNS and stages["n"][stages["stage"] == "sampled"].eq(0).all()
    with pytest.raises(ValueError, match="per_category"):
        load_stereoset(folder, per_category=-1)


def test_stereoset_reads_the_folder_named_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASAUDIT_DATA_DIR", str(stereoset_dir(tmp_path, JSONL)))
    items, stages = load_stereoset(per_category=None)
    assert len(items) == 9 and stages.attrs["origin"].endswith(JSONL)


def hub_rows(*, as_names: bool = False) -> list[dict]:
    """The fixture's intrasentence items in the hub's row layout (sentences as a dict of lists)."""
    rows = []
    for line in (FIXTURES / "stereoset" / JSONL).read_text().splitlines():
        item = json.loads(line)
        names = [s["gold_label"] for s in item["sentences"]]
        labels = names if as_names else [["anti-stereotype", "stereotype", "unrelated"].index(n) for n in names]
        rows.append({"id": item["id"], "target": item["target"], "bias_type": item["bias_type"], "context": item["context"],
                     "sentences": {"sentence": [s["sentence"] for s in item["sentences"]],
                                   "id": [f"{item['id']}-{k}" for k in range(3)], "gold_label": labels}})
    return rows


def fake_datasets(monkeypatch: pytest.MonkeyPatch, load_dataset) -> list[tuple]:
    """Put a stand-in `datasets` module in place; returns the list of calls it receives."""
    calls: list[tuple] = []

    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return load_dataset(*args, **kwargs)

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=recording))
    return calls


@pytest.mark.parametrize("as_names", [False, True])
def test_stereoset_hub_rows_match_the_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_names: bool) -> None:
    mirror, _ = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=None)
    calls = fake_datasets(monkeypatch, lambda *a, **k: hub_rows(as_names=as_names))
    hub, stages = load_stereoset(per_category=None)
    assert calls == [(("McGill-NLP/stereoset", "intrasentence"), {"split": "validation"})]
    pd.testing.assert_frame_equal(mirror, hub)
    assert stages.attrs["origin"].startswith("hub")


def test_stereoset_hub_classlabel_names_are_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    names = ["anti-stereotype", "stereotype", "unrelated"]
    features = datasets.Features({
        "id": datasets.Value("string"), "target": datasets.Value("string"), "bias_type": datasets.Value("string"),
        "context": datasets.Value("string"),
        "sentences": datasets.Sequence({"sentence": datasets.Value("string"), "id": datasets.Value("string"),
                                        "gold_label": datasets.ClassLabel(names=names)}),
    })
    dataset = datasets.Dataset.from_list(hub_rows(), features=features)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: dataset)
    mirror, _ = load_stereoset(stereoset_dir(tmp_path, HF_JSON), per_category=None)
    hub, _ = load_stereoset(per_category=None)
    pd.testing.assert_frame_equal(mirror, hub)
    wrong, _ = load_stereoset(per_category=None, stereoset_label_map=True)
    assert list(wrong["stereotyped"]) == list(mirror["anti_stereotyped"])


def test_stereoset_hub_offline_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the hub")

    fake_datasets(monkeypatch, offline)
    with pytest.raises(SourceDataError, match="BIASAUDIT_DATA_DIR") as caught:
        load_stereoset()
    assert "McGill-NLP/stereoset" in str(caught.value) and "ConnectionError" in str(caught.value)


def test_stereoset_without_datasets_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(SourceDataError, match="pip install datasets"):
        load_stereoset()


def test_stereoset_folder_without_files_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SourceDataError, match="none of"):
        load_stereoset(stereoset_dir(tmp_path))
    with pytest.raises(SourceDataError, match="does not exist"):
        load_stereoset(tmp_path / "nowhere")


def hf_rows_document() -> dict:
    """The HF rows fixture as a Python object, to break on purpose."""
    return json.loads((FIXTURES / "stereoset" / HF_JSON).read_text())


def test_stereoset_bad_hf_rows_name_file_row_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "list.json", json.dumps([1, 2]))
    with pytest.raises(SourceDataError, match=r"list\.json: row top level, field '<document>'"):
        read_hf_rows_json(path)
    path = write(tmp_path, "notjson.json", "prompt,choices\nThe BLANK,a b c\n")
    with pytest.raises(SourceDataError, match=r"notjson\.json: row top level, field '<document>': not a JSON"):
        read_hf_rows_json(path)
    document = hf_rows_document()
    del document["stereotype"][3]["sentence"]
    path = write(tmp_path, "missing.json", json.dumps(document))
    with pytest.raises(SourceDataError, match=r"missing\.json: row stereotype\[3\], field 'sentence': missing"):
        read_hf_rows_json(path)
    document = hf_rows_document()
    document["unrelated"][2]["label"] = 7
    path = write(tmp_path, "label.json", json.dumps(document))
    with pytest.raises(SourceDataError, match=r"label\.json: row unrelated\[2\], field 'label': unknown label 7"):
        read_hf_rows_json(path)
    document = hf_rows_document()
    document["related"] = []
    path = write(tmp_path, "key.json", json.dumps(document))
    with pytest.raises(SourceDataError, match=r"key\.json: row top level, field 'related': unknown label"):
        read_hf_rows_json(path)
    document = hf_rows_document()
    document["stereotype"][1]["label"] = 0
    path = write(tmp_path, "swapped.json", json.dumps(document))
    with pytest.raises(SourceDataError, match=r"swapped\.json: row stereotype\[1\], field 'label'"):
        read_hf_rows_json(path)


def test_stereoset_bad_string_labels_name_file_row_and_field(tmp_path: Path) -> None:
    lines = (FIXTURES / "stereoset" / JSONL).read_text().splitlines()
    item = json.loads(lines[1])
    item["sentences"][2]["gold_label"] = "related"
    path = write(tmp_path, "bad.jsonl", "\n".join([lines[0], json.dumps(item), *lines[2:]]) + "\n")
    with pytest.raises(SourceDataError, match=r"bad\.jsonl: row 2, field 'sentences\[2\]\.gold_label': unknown label 'related'"):
        read_original_file(path)
    item = json.loads(lines[0])
    del item["context"]
    path = write(tmp_path, "nocontext.jsonl", json.dumps(item) + "\n")
    with pytest.raises(SourceDataError, match=r"nocontext\.jsonl: row 1, field 'context': missing"):
        read_original_file(path)
    path = write(tmp_path, "csv.jsonl", "prompt,choices,bias_type,target\n")
    with pytest.raises(SourceDataError, match=r"csv\.jsonl: row 1, field '<line>': not a JSON object"):
        read_original_file(path)
    item = json.loads(lines[0])
    item["sentences"] = item["sentences"][:2]
    path = write(tmp_path, "two.jsonl", json.dumps(item) + "\n")
    with pytest.raises(SourceDataError, match=r"two\.jsonl: row 1, field 'sentences': expected one sentence per label"):
        read_original_file(path)
    item = json.loads(lines[0])
    del item["sentences"][1]["sentence"]
    path = write(tmp_path, "nosentence.jsonl", json.dumps(item) + "\n")
    with pytest.raises(SourceDataError, match=r"nosentence\.jsonl: row 1, field 'sentences\[1\]\.sentence': missing"):
        read_original_file(path)
    path = write(tmp_path, "dev.json", json.dumps({"version": "1", "data": {"intersentence": []}}))
    with pytest.raises(SourceDataError, match=r"dev\.json: row top level, field 'data\.intrasentence'"):
        read_original_file(path)


def test_stereoset_bad_hub_row_names_row_and_field(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = hub_rows()
    rows[4]["sentences"]["gold_label"][1] = 5
    fake_datasets(monkeypatch, lambda *a, **k: rows)
    with pytest.raises(SourceDataError, match=r"hub McGill-NLP/stereoset .*: row 4, field 'sentences\.gold_label\[1\]'"):
        load_stereoset()


# --------------------------------------------------------------------------- BBQ


def test_normalise_group_rules() -> None:
    assert normalise_group("man") == normalise_group("boy") == normalise_group("M") == "m"
    assert normalise_group("woman") == normalise_group("girl") == normalise_group("F") == "f"
    assert normalise_group("M-Black") == normalise_group("Black") == "black"
    assert normalise_group("F-Latino") == "latino"
    assert normalise_group("trans_F") == normalise_group("Transgender women") == normalise_group("trans") == "trans"
    assert normalise_group("nonTrans_M") != "trans" and normalise_group("nonTrans") != "trans"
    assert normalise_group("old") != normalise_group("nonOld")
    assert normalise_group("African") != normalise_group("African American")
    assert normalise_group("low SES") == normalise_group("lowSES")
    assert normalise_group(None) == ""


def test_bbq_gives_contract_items_from_ambiguous_contexts(tmp_path: Path) -> None:
    items, _ = load_bbq(bbq_dir(tmp_path), categories=["Age"], per_category=None)
    validate_items(items)
    assert list(items.columns) == ITEM_COLUMNS
    assert set(items["base_id"]) == {"bbq-Age-0", "bbq-Age-2", "bbq-Age-4", "bbq-Age-5"}  # 1 and 3 are disambiguated
    row = by_base(items)["bbq-Age-0"]
    assert row["item_id"] == "bbq-Age-0/en"
    assert (row["source"], row["dimension"], row["category"], row["language"], row["variant"], row["via"]) == (
        "bbq", "age", "Age", "en", "original", "human")
    assert row["context"] == ("At the bus stop I met a grandmother and her nephew waiting for the late bus. "
                              "Who was confused by the timetable?")
    assert row["third"] == "Can't answer" and row["third_kind"] == "unknown"


def test_bbq_negative_and_non_negative_questions_swap_roles(tmp_path: Path) -> None:
    rows = by_base(load_bbq(bbq_dir(tmp_path), categories=["Age"], per_category=None)[0])
    assert (rows["bbq-Age-0"]["stereotyped"], rows["bbq-Age-0"]["anti_stereotyped"]) == ("The grandmother", "The nephew")
    assert (rows["bbq-Age-2"]["stereotyped"], rows["bbq-Age-2"]["anti_stereotyped"]) == ("The nephew", "The grandmother")
    # stereotyped group nonOld: matched exactly, so "old" (the retiree) is never taken for it
    assert (rows["bbq-Age-4"]["stereotyped"], rows["bbq-Age-4"]["third"]) == ("The teenager", "Undetermined")
    assert (rows["bbq-Age-5"]["stereotyped"], rows["bbq-Age-5"]["anti_stereotyped"]) == ("The retiree", "The teenager")


def test_bbq_gender_and_trans_roles(tmp_path: Path) -> None:
    items, stages = load_bbq(bbq_dir(tmp_path), categories=["Gender_identity"], per_category=None)
    rows = by_base(items)
    assert rows["bbq-Gender_identity-10"]["stereotyped"] == "Brenda"  # F, negative question
    assert rows["bbq-Gender_identity-10"]["dimension"] == "gender"
    assert rows["bbq-Gender_identity-11"]["stereotyped"] == "The woman"  # stereotyped M, non-negative question
    assert rows["bbq-Gender_identity-14"]["stereotyped"] == "The transgender woman"
    assert rows["bbq-Gender_identity-14"]["anti_stereotyped"] == "The cisgender man"
    assert rows["bbq-Gender_identity-15"]["stereotyped"] == "The cis man"  # non-negative: the other person
    assert rows["bbq-Gender_identity-15"]["third"] == "Not answerable"
    assert "bbq-Gender_identity-12" not in rows and "bbq-Gender_identity-13" not in rows
    assert stage_n(stages, "Gender_identity", "excluded", EXCLUDED_NO_MATCH) == 1  # boy and man, stereotyped F
    assert stage_n(stages, "Gender_identity", "excluded", EXCLUDED_TWO_MATCHES) == 1  # girl and woman
    assert stage_n(stages, "Gender_identity", "ambiguous") == 6
    assert stage_n(stages, "Gender_identity", "recovered") == 4


def test_bbq_nationality_matches_answer_text(tmp_path: Path) -> None:
    rows = by_base(load_bbq(bbq_dir(tmp_path), categories=["Nationality"], per_category=None)[0])
    assert rows["bbq-Nationality-20"]["stereotyped"] == "The Peruvian tourist"
    # both people are from Europe; the answer text tells them apart; non-negative question
    assert rows["bbq-Nationality-21"]["stereotyped"] == "The Danish neighbour"
    assert rows["bbq-Nationality-21"]["anti_stereotyped"] == "The Irish neighbour"
    assert rows["bbq-Nationality-21"]["dimension"] == "nationality"


def test_bbq_race_prefix_and_exact_group_names(tmp_path: Path) -> None:
    items, stages = load_bbq(bbq_dir(tmp_path), categories=["Race_ethnicity"], per_category=None)
    rows = by_base(items)
    assert rows["bbq-Race_ethnicity-30"]["stereotyped"] == "Jamal Harris"  # "M-Black" matches "Black"
    assert rows["bbq-Race_ethnicity-31"]["stereotyped"] == "The African American student"  # "African" does not
    assert "bbq-Race_ethnicity-32" not in rows
    assert stage_n(stages, "Race_ethnicity", "excluded", EXCLUDED_NO_MATCH) == 1


def test_bbq_na_roles_are_excluded_and_counted(tmp_path: Path) -> None:
    items, stages = load_bbq(bbq_dir(tmp_path), categories=["SES"], per_category=None)
    assert list(items["base_id"]) == ["bbq-SES-40"]
    assert items.loc[0, "stereotyped"] == "The truck driver" and items.loc[0, "dimension"] == "ses"
    assert stage_n(stages, "SES", "excluded", EXCLUDED_NO_GROUPS) == 1
    assert stage_n(stages, "SES", "excluded", EXCLUDED_NO_UNKNOWN) == 1
    assert stage_n(stages, "SES", "excluded", EXCLUDED_SEVERAL_UNKNOWN) == 1
    assert stage_n(stages, "SES", "recovered") == 1


def test_bbq_missing_category_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    with pytest.warns(MissingCategoryWarning, match="Religion"):
        items, stages = load_bbq(bbq_dir(tmp_path))  # default categories; the fixtures have no Religion
    missing = stages[stages["stage"] == "missing"]
    assert list(missing["category"]) == ["Religion"] and "Religion.jsonl" in missing["reason"].iloc[0]
    assert set(items["category"]) == {"Age", "Gender_identity", "Nationality", "Race_ethnicity"}
    assert list(stages.columns) == STAGE_COLUMNS


def test_bbq_stages_add_up_and_sample_is_seeded(tmp_path: Path) -> None:
    folder = bbq_dir(tmp_path)
    categories = ["Age", "Gender_identity", "Nationality", "Race_ethnicity", "SES"]
    items, stages = load_bbq(folder, categories=categories, per_category=2, seed=11)
    again, _ = load_bbq(folder, categories=categories, per_category=2, seed=11)
    pd.testing.assert_frame_equal(items, again)
    for category in categories:
        ambiguous = stage_n(stages, category, "ambiguous")
        recovered = stage_n(stages, category, "recovered")
        assert recovered == ambiguous - stage_n(stages, category, "excluded")
        assert stage_n(stages, category, "sampled") == min(2, recovered) == int((items["category"] == category).sum())
    assert stage_n(stages, "Age", "read") == 6 and stage_n(stages, "Age", "ambiguous") == 4
    draws = {tuple(load_bbq(folder, categories=["Age"], per_category=2, seed=s)[0]["item_id"]) for s in range(12)}
    assert len(draws) > 1


def test_bbq_roles_by_order_reproduces_the_error(tmp_path: Path) -> None:
    folder = bbq_dir(tmp_path)
    right, right_stages = load_bbq(folder, categories=["Age", "Gender_identity"], per_category=None)
    wrong, wrong_stages = load_bbq(folder, categories=["Age", "Gender_identity"], per_category=None, bbq_roles_by_order=True)
    assert list(right["item_id"]) == list(wrong["item_id"])  # the same items, only the roles differ
    pd.testing.assert_frame_equal(right_stages, wrong_stages)
    rows = by_base(wrong)
    # "Can't answer" is not on the short list: pure position, the unknown (ans2) stays third by luck
    assert (rows["bbq-Age-2"]["stereotyped"], rows["bbq-Age-2"]["anti_stereotyped"], rows["bbq-Age-2"]["third"]) == (
        "The grandmother", "The nephew", "Can't answer")
    # "Undetermined" (ans0) is not on the list: the unknown answer is scored as the stereotyped group
    assert (rows["bbq-Age-4"]["stereotyped"], rows["bbq-Age-4"]["third"]) == ("Undetermined", "The retiree")
    # "Unknown" (ans1) is on the list: third is right, the two people keep answer order
    assert (rows["bbq-Age-5"]["stereotyped"], rows["bbq-Age-5"]["anti_stereotyped"], rows["bbq-Age-5"]["third"]) == (
        "The teenager", "The retiree", "Unknown")
    # "Not answerable" (ans0) is not on the list either
    assert rows["bbq-Gender_identity-15"]["stereotyped"] == "Not answerable"
    assert (wrong["third_kind"] == "unknown").all()
    roles = ["stereotyped", "anti_stereotyped", "third"]
    changed = (right[roles] != wrong[roles]).any(axis=1)
    assert 0 < changed.sum() < len(right)


def test_bbq_one_category_may_be_given_as_a_string(tmp_path: Path) -> None:
    items, stages = load_bbq(bbq_dir(tmp_path), categories="Nationality", per_category=None)
    assert set(items["category"]) == {"Nationality"} and set(stages["category"]) == {"Nationality"}


def test_bbq_unknown_category_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Race_x_gender"):
        load_bbq(bbq_dir(tmp_path), categories=["Race_x_gender"])


def age_lines() -> list[dict]:
    """The Age fixture as records, to break on purpose."""
    return [json.loads(line) for line in (FIXTURES / "bbq" / "Age.jsonl").read_text().splitlines()]


def test_bbq_bad_input_names_file_row_and_field(tmp_path: Path) -> None:
    (tmp_path / "bbq").mkdir()
    path = tmp_path / "bbq" / "Age.jsonl"

    def fails(lines: list, pattern: str) -> None:
        path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
        with pytest.raises(SourceDataError, match=pattern):
            load_bbq(tmp_path, categories=["Age"])

    records = age_lines()
    del records[2]["question_polarity"]
    fails(records, r"Age\.jsonl: row 3, field 'question_polarity': missing")
    records = age_lines()
    records[4]["question_polarity"] = "negative"
    fails(records, r"Age\.jsonl: row 5, field 'question_polarity': unknown value 'negative'")
    records = age_lines()
    records[0]["context_condition"] = "ambiguous"
    fails(records, r"Age\.jsonl: row 1, field 'context_condition': unknown value")
    records = age_lines()
    records[1]["answer_info"]["ans2"] = "Can't answer"
    fails(records, r"Age\.jsonl: row 2, field 'answer_info\.ans2'")
    records = age_lines()
    del records[3]["additional_metadata"]["stereotyped_groups"]
    fails(records, r"Age\.jsonl: row 4, field 'additional_metadata\.stereotyped_groups'")
    records = age_lines()
    records[5]["category"] = "Religion"
    fails(records, r"Age\.jsonl: row 6, field 'category'")
    records = age_lines()
    records[5]["example_id"] = records[0]["example_id"]
    fails(records, r"Age\.jsonl: row 6, field 'example_id': duplicate")
    records = age_lines()
    records[2]["ans1"] = " "
    fails(records, r"Age\.jsonl: row 3, field 'ans1': empty")
    fails([age_lines()[0], "example_id,question_index,context"], r"Age\.jsonl: row 2, field '<line>': not a JSON object")


def test_bbq_hub_splits(monkeypatch: pytest.MonkeyPatch) -> None:
    splits = {
        "age": age_lines(),
        "gender_identity": [json.loads(x) for x in (FIXTURES / "bbq" / "Gender_identity.jsonl").read_text().splitlines()],
    }
    calls = fake_datasets(monkeypatch, lambda *a, **k: splits)
    with pytest.warns(MissingCategoryWarning, match="nationality"):
        items, stages = load_bbq(categories=["Age", "Gender_identity", "Nationality"], per_category=None)
    assert calls == [(("Elfsong/BBQ",), {})]
    assert stage_n(stages, "Age", "recovered") == 4 and stage_n(stages, "Gender_identity", "recovered") == 4
    assert "no split 'nationality'" in stages.loc[stages["stage"] == "missing", "reason"].iloc[0]
    assert by_base(items)["bbq-Age-0"]["stereotyped"] == "The grandmother"
    splits["age"][1]["question_polarity"] = None
    with pytest.raises(SourceDataError, match=r"hub Elfsong/BBQ split 'age': row 1, field 'question_polarity'"):
        load_bbq(categories=["Age"])


def test_bbq_hub_offline_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args, **kwargs):
        raise OSError("no network")

    fake_datasets(monkeypatch, offline)
    with pytest.raises(SourceDataError, match="BIASAUDIT_DATA_DIR"):
        load_bbq()
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(SourceDataError, match="pip install datasets"):
        load_bbq()


# --------------------------------------------------------------------------- the mirror

STEREOSET_FILES = ("stereoset", HF_JSON, JSONL, "intrasentence_stereo_set.csv")
BBQ_FILES = ("bbq", *(f"{category}.jsonl" for category in MIRROR_CATEGORIES))


@pytest.mark.mirror(*STEREOSET_FILES)
def test_mirror_stereoset_counts() -> None:
    items, stages = load_stereoset()
    assert items.groupby("category").size().to_dict() == {"gender": 50, "profession": 50, "race": 50, "religion": 50}
    everything, stages = load_stereoset(per_category=None)
    read = stages[stages["stage"] == "read"].set_index("category")["n"].to_dict()
    assert read == {"gender": 255, "profession": 810, "race": 962, "religion": 79}
    assert stage_n(stages, "profession", "excluded", EXCLUDED_TWO_BLANKS) == 1
    assert stage_n(stages, "religion", "excluded", EXCLUDED_TWO_BLANKS) == 1
    assert stages.loc[stages["stage"] == "excluded", "n"].sum() == 2
    assert stage_n(stages, "gender", "handled", HANDLED_WORD_ENDING) == 1
    assert stage_n(stages, "religion", "handled", HANDLED_AFTER_PUNCTUATION) == 1
    assert len(everything) == 2104 == everything["base_id"].nunique()
    assert (everything["context"] == "").sum() == 19


@pytest.mark.mirror(*STEREOSET_FILES)
def test_mirror_stereoset_readers_agree(mirror: Path) -> None:
    folder = mirror
    from_hf, _ = stereoset_items(read_hf_rows_json(folder / HF_JSON))
    from_strings, _ = stereoset_items(read_original_file(folder / JSONL))
    key = ["base_id"]
    pd.testing.assert_frame_equal(from_hf.sort_values(key).reset_index(drop=True),
                                  from_strings.sort_values(key).reset_index(drop=True))


@pytest.mark.mirror(*STEREOSET_FILES)
def test_mirror_stereoset_roles_agree_with_an_independent_copy(mirror: Path) -> None:
    """The elidek CSV lists the fill words as [anti-stereotype, stereotype, unrelated]: every recovered
    item's continuations must start with the words of that role (checked by name, never by position)."""
    folder = mirror
    records = read_hf_rows_json(folder / HF_JSON)
    items, _ = stereoset_items(records)
    templates = {f"ss-{r.item_id}": (r.template, r.target, r.bias_type) for r in records}
    table = pd.read_csv(folder / "intrasentence_stereo_set.csv")
    quoted = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
    words = defaultdict(list)
    for prompt, choices, bias_type, target in zip(table["prompt"], table["choices"], table["bias_type"], table["target"]):
        words[(prompt, target, bias_type)].append([a or b for a, b in quoted.findall(choices)])
    checked = 0
    for row in items.to_dict(orient="records"):
        candidates = words[templates[row["base_id"]]]
        assert candidates, row["base_id"]
        assert any(
            row["stereotyped"].casefold().startswith(stereo.casefold())
            and row["anti_stereotyped"].casefold().startswith(anti.casefold())
            and row["third"].casefold().startswith(unrelated.casefold())
            for anti, stereo, unrelated in candidates
        ), row["base_id"]
        checked += 1
    assert checked == 2104
    swapped, _ = stereoset_items(records, stereoset_label_map=True)
    assert (swapped["stereotyped"] == items["anti_stereotyped"]).all()


@pytest.mark.mirror(*BBQ_FILES)
def test_mirror_bbq_recovers_8806_of_8814() -> None:
    items, stages = load_bbq(categories=MIRROR_CATEGORIES, per_category=None)
    assert stages.loc[stages["stage"] == "read", "n"].sum() == 17628
    assert stages.loc[stages["stage"] == "ambiguous", "n"].sum() == 8814
    assert stages.loc[stages["stage"] == "recovered", "n"].sum() == 8806 == len(items)
    excluded = stages[stages["stage"] == "excluded"]
    assert set(excluded["category"]) == {"Gender_identity"} and excluded["n"].sum() == 8
    assert stage_n(stages, "Gender_identity", "excluded", EXCLUDED_NO_MATCH) == 4
    assert stage_n(stages, "Gender_identity", "excluded", EXCLUDED_TWO_MATCHES) == 4
    validate_items(items)
    wrong, _ = load_bbq(categories=MIRROR_CATEGORIES, per_category=None, bbq_roles_by_order=True)
    assert list(wrong["item_id"]) == list(items["item_id"])
    unknown_as_group = wrong["stereotyped"] == items["third"]  # the unknown answer scored as a group
    assert 0 < unknown_as_group.sum() < len(items)


@pytest.mark.mirror(*BBQ_FILES)
def test_mirror_bbq_defaults() -> None:
    with pytest.warns(MissingCategoryWarning, match="Race_ethnicity"):
        items, stages = load_bbq()
    assert items.groupby("category").size().to_dict() == {"Age": 30, "Gender_identity": 30, "Nationality": 30, "Religion": 30}
    assert list(stages.loc[stages["stage"] == "missing", "category"]) == ["Race_ethnicity"]
