"""The items table: the project's bank loads, and bad rows are named precisely."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from biasaudit.items import DEFAULT_BANK, ITEM_COLUMNS, ItemError, is_collapsed, join_text, read_items, select_items

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
    assert f"{path}: row 3, field 'language'" in message
    assert f"{path}: row 4, field 'stereotyped': Value error, is empty" in message


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
    with pytest.raises(ItemError, match=r"missing column\(s\) \['third_kind'\]"):
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
