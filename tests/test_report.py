"""Tables are shown for reading, and text from the data is shown as text."""

from __future__ import annotations

import numpy as np
import pandas as pd
from biasaudit.book.report import Report, TableStyle, readable, spoken_list


def test_readable_names_rounds_counts_and_hides_the_index():
    table = pd.DataFrame({"language": ["es", "sw"], "n_items": [64.0, np.nan], "drop": [0.12345, -0.5],
                          "share": [0.25, 1.0], "empty": [np.nan, np.nan]}, index=[7, 9])
    html = readable(table, TableStyle(columns={"language": "language", "n_items": "items", "drop": "drop",
                                               "share": "share", "empty": "empty"}, percent=("share",))).to_html()
    assert ">items<" in html and ">n_items<" not in html
    assert ">64<" in html and "64.000" not in html, "counts as integers"
    assert ">0.123<" in html and ">-0.500<" in html and ">25%<" in html
    assert ">empty<" not in html, "all-empty columns are dropped"
    assert ">7<" not in html and ">9<" not in html, "no positional index"


def test_text_from_the_data_is_escaped():
    table = pd.DataFrame({"context": ["<script>alert(1)</script>", "**bold** & <b>tag</b>"]})
    html = readable(table).to_html()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;tag&lt;/b&gt;" in html and "**bold** &amp;" in html


def test_an_empty_table_becomes_a_note():
    report = Report()
    report.add_table("nothing", pd.DataFrame(columns=["a"]), TableStyle(empty="No StereoSet items here."))
    shown = report.table("nothing")
    assert "No StereoSet items here." in shown.data
    # Where the prose already says why a section is empty, the table shows nothing at all.
    report.add_table("quiet", pd.DataFrame(columns=["a"]), TableStyle(empty=""))
    assert report.table("quiet") is None
    report.add_table("full", pd.DataFrame({"a": [1]}), TableStyle(empty=""))
    assert report.table("full") is not None


def test_spoken_list():
    assert [spoken_list([]), spoken_list(["a"]), spoken_list(["a", "b"]), spoken_list(["a", "b", "c"])] == \
        ["", "a", "a and b", "a, b and c"]


def test_a_column_with_one_value_in_every_row_is_said_once_in_the_caption():
    table = pd.DataFrame({"language": ["es", "fr", "sw"], "n_items": [64, 64, 64], "drop": [0.1, 0.2, 0.3],
                          "reliable": [False, False, False], "q": [0.5, np.nan, 0.5]})
    html = readable(table, TableStyle(columns={"language": "language", "n_items": "items", "drop": "drop",
                                               "reliable": "reliable", "q": "q"})).to_html()
    assert "<caption>In every row: items 64; reliable no.</caption>" in html
    assert ">items<" not in html and ">reliable<" not in html
    assert ">q<" in html, "a column with an empty cell is not constant"
    assert ">0.200<" in html
    # One row, or a style that asks to keep them: every column stays.
    assert ">n_items<" in readable(table.head(1)).to_html()
    kept = readable(table, TableStyle(fold_constant=False)).to_html()
    assert ">n_items<" in kept and "<caption>" not in kept
    # Where every number is the same in every row, nothing is folded: a table of keys alone says nothing.
    flat = readable(table.assign(drop=0.0, q=0.5)).to_html()
    assert "<caption>" not in flat and ">n_items<" in flat and ">drop<" in flat


def test_a_transposed_table_has_one_column_per_row_with_each_value_written_as_its_column_shows_it():
    table = pd.DataFrame({"source": ["written", "bbq"], "n_items": [64, 12], "drop": [0.12345, np.nan],
                          "share": [0.5, 0.25]})
    styler = readable(table, TableStyle(columns={"source": "source", "n_items": "items", "drop": "drop",
                                                 "share": "same choice"}, percent=("share",), transpose=True))
    assert list(styler.data.columns) == ["", "written", "bbq"]
    assert styler.data.values.tolist() == [["items", "64", "12"], ["drop", "0.123", ""],
                                           ["same choice", "50%", "25%"]]


def test_a_table_too_wide_for_the_text_column_is_split_with_its_key_columns_repeated():
    from biasaudit.book import widths
    from biasaudit.book.report import SplitTable, fitting_parts

    models = ["aya-23-8b", "aya-expanse-8b", "bloomz-7b", "gemma2-9b", "llama3.1-8b", "mistral-7b", "olmo2-7b",
              "qwen2.5-7b", "solar-10.7b", "yi-1.5-9b"]
    table = pd.DataFrame({"variant": ["original", "translation"], "language": ["en", "es"],
                          **{m: [0.5123, 0.4987] for m in models}})
    shown = readable(table)
    assert isinstance(shown, SplitTable) and len(shown.parts) == 2
    first, second = (list(part.data.columns) for part in shown.parts)
    assert first == ["variant", "language", *models[:5]] and second == ["variant", "language", *models[5:]], \
        "the models dealt out evenly, in order, each part led by the two text columns"
    html = shown.to_html()
    assert html.count("<table") == 2 and ">0.512<" in html
    assert "The table above, continued (2 of 2): mistral-7b, olmo2-7b, qwen2.5-7b, solar-10.7b and yi-1.5-9b." in html
    # each part fits the reader's column by the same measure; the whole did not
    text = {c: [f"{v:.3f}" if isinstance(v, float) else v for v in table[c]] for c in table}
    width = {c: widths.column_widths([c], [[v] for v in text[c]])[0] for c in table}
    assert widths.table_px(list(width.values())) > widths.TEXT_COLUMN_PX
    assert all(widths.table_px([width[c] for c in part]) <= widths.TEXT_COLUMN_PX for part in (first, second))
    # a table that fits stays one table
    assert not isinstance(readable(table[["variant", "language", *models[:3]]]), SplitTable)
    lead, parts = fitting_parts(table, {}, keys=1)
    assert lead == ["variant"] and [c for part in parts for c in part] == ["language", *models]


def test_korean_cells_keep_their_words_whole():
    html = readable(pd.DataFrame({"language": ["ko", "en"], "context": ["간호사가 말했다", "The nurse said"]})).to_html()
    import re

    styled = re.findall(r"#T_\w+?_(row\d+_col\d+) \{\s*word-break: keep-all;\s*\}", html)
    assert styled == ["row0_col1"], "only the Korean cell"


def test_a_text_said_once_in_the_caption_is_quoted_with_its_own_punctuation():
    table = pd.DataFrame({"model": ["a", "b"], "context": ["The kids were at home.", "The kids were at home."],
                          "third": ["a fence.", "a fence."], "soft": [0.1, 0.2]})
    html = readable(table).to_html()
    assert "<caption>In every row: context “The kids were at home.”; third “a fence.”.</caption>" in html
