"""The items table: the project's bank loads, and bad rows are named precisely."""

from __future__ import annotations

import csv

import pandas as pd
import pytest
from biasaudit.data.item_table import (
    DEFAULT_BANK,
    ITEM_COLUMNS,
    ItemError,
    bank_problems,
    is_collapsed,
    join_text,
    read_items,
    select_items,
)

LANGUAGES = ["es", "fr", "zh", "ar", "ko", "sw", "hi"]


def test_bank_is_complete():
    bank = read_items()
    english = bank.loc[bank["variant"] == "original"]
    assert len(english) >= 12 and english["dimension"].nunique() >= 4
    for base_id, versions in bank.groupby("base_id"):
        translated = set(versions.loc[versions["variant"] == "translation", "language"])
        assert translated == set(LANGUAGES), f"{base_id} lacks {set(LANGUAGES) - translated}"
        reworded = set(versions.loc[(versions["variant"] == "rewording") & (versions["language"] == "en"), "via"])
        assert reworded == {"human-1", "human-2", "human-3"}, base_id
    assert (bank["source"] == "written").all()


def write_bank(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=ITEM_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def good_rows():
    bank = read_items().head(3)
    return bank.to_dict(orient="records")


def test_bad_rows_name_file_row_and_field(tmp_path):
    rows = good_rows()
    rows[1]["language"] = "eng"
    rows[2]["stereotyped"] = ""
    path = tmp_path / "bad.csv"
    write_bank(path, rows)
    with pytest.raises(ItemError) as err:
        read_items(path)
    message = str(err.value)
    assert f"{path}: row 3 ({rows[1]['item_id']}), field 'language'" in message
    assert f"{path}: row 4 ({rows[2]['item_id']}), field 'stereotyped': is empty" in message


def test_duplicates_orphans_and_missing_columns_are_rejected(tmp_path):
    rows = good_rows()
    rows.append(dict(rows[1]))
    rows.append({**rows[1], "item_id": "w-x-999/es", "base_id": "w-x-999"})
    path = tmp_path / "dup.csv"
    write_bank(path, rows)
    with pytest.raises(ItemError, match=r"row 5, field 'item_id': duplicate id") as err:
        read_items(path)
    assert "row 6, field 'base_id': 'w-x-999' has no English original row" in str(err.value)
    pd.DataFrame(rows).drop(columns=["third_kind"]).to_csv(tmp_path / "cols.csv", index=False)
    with pytest.raises(ItemError, match=r"missing column \['third_kind'\]; expected \['item_id'"):
        read_items(tmp_path / "cols.csv")


def test_collapsed_contrast_after_nfkc_and_casefold():
    table = pd.DataFrame({"stereotyped": ["Ｈe left.", "she left."], "anti_stereotyped": ["he LEFT.", "he left."]})
    assert is_collapsed(table).tolist() == [True, False]


def test_select_items_sets_collapsed_aside_and_keeps_english():
    bank = read_items(DEFAULT_BANK)
    version = bank.index[bank["language"] == "sw"][0]
    bank.loc[version, "anti_stereotyped"] = bank.loc[version, "stereotyped"].upper()
    kept, collapsed = select_items(bank, languages=["en", "sw"], variants=["original", "translation"])
    assert collapsed["item_id"].tolist() == [bank.loc[version, "item_id"]]
    assert set(kept["language"]) == {"en", "sw"} and set(kept["variant"]) == {"original", "translation"}


def test_join_text():
    assert join_text("The nurse said that", "she left.", "en") == "The nurse said that she left."
    assert join_text("护士说", "她累了。", "zh") == "护士说她累了。"
    assert join_text("", "Nurses are kind.", "en") == "Nurses are kind."


def test_bank_checks_find_missing_versions_close_thirds_and_collapses():
    bank = read_items()
    assert bank_problems(bank).query("severity == 'error'").empty, "the project's bank passes its own checks"
    broken = bank.loc[~((bank["base_id"] == "w-age-001") & (bank["language"] == "ko"))].reset_index(drop=True)
    broken = broken.loc[broken["item_id"] != "w-age-002/en~human-2"].reset_index(drop=True)
    row = broken.index[broken["item_id"] == "w-race-001/sw"][0]
    broken.loc[row, "third"] = broken.loc[row, "stereotyped"].rstrip(".") + "!"
    other = broken.index[broken["item_id"] == "w-race-001/fr"][0]
    broken.loc[other, "anti_stereotyped"] = broken.loc[other, "stereotyped"]
    problems = bank_problems(broken, origin="bank.csv")
    messages = problems["problem"].tolist()
    assert "w-age-001: no translation into 'ko'" in messages
    assert "w-age-002: no English rewording 'human-2'" in messages
    assert any(m.startswith("w-race-001/sw: third option is") for m in messages)
    collapsed = problems.query("severity == 'collapsed'")
    assert collapsed["problem"].tolist() == ["w-race-001/fr: contrast collapsed"]
    assert collapsed["row"].item() == other + 2


def test_check_items_cli_exit_codes(tmp_path, capsys):
    from biasaudit.data.check_items import main

    assert main([str(DEFAULT_BANK)]) == 0
    rows = good_rows()
    rows[0]["via"] = ""
    write_bank(tmp_path / "bad.csv", rows)
    assert main([str(tmp_path / "bad.csv")]) == 1
    assert "row 2 (w-gender-001/en), field 'via'" in capsys.readouterr().err
