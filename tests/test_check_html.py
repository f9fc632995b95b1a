"""The rendered book's width check: a table's narrowest layout, worked by hand."""

from __future__ import annotations

import pytest
from biasaudit.book.check_html import (
    ARTICLE_EM,
    CELL_PADDING_EM,
    min_width_em,
    wide_tables,
)


def test_a_column_is_as_wide_as_its_longest_unbreakable_word():
    rows = [["model", "drop (English − language)"], ["gemma3-270m", "0.049"], ["smollm2-135m", "-0.013"]]
    # "smollm2-" (8 letters; a line may break after the hyphen) and "language)" (9 letters)
    assert min_width_em(rows) == pytest.approx(8 * 0.56 + 9 * 0.56 + 2 * CELL_PADDING_EM)


def test_wide_characters_break_anywhere():
    assert min_width_em([["护士说她累了"]]) == pytest.approx(1.0 + CELL_PADDING_EM)
    assert min_width_em([["护士 said"]]) == pytest.approx(4 * 0.56 + CELL_PADDING_EM)


def test_a_page_with_a_table_too_wide_for_the_article_is_named(tmp_path):
    header = "".join(f"<th>column{i}</th>" for i in range(12))  # 12 × (7 × 0.56 + 1.2) ≈ 61 em
    (tmp_path / "wide.html").write_text(f"<html><body><table><tr>{header}</tr></table></body></html>")
    narrow = "".join(f"<th>column{i}</th>" for i in range(8))  # ≈ 41 em
    (tmp_path / "narrow.html").write_text(f"<html><body><p>a</p><table><tr>{narrow}</tr></table></body></html>")
    found = wide_tables(tmp_path)
    assert len(found) == 1 and found[0].startswith("wide.html: table 1 (column0, column1") and f"of {ARTICLE_EM:.0f}" in found[0]
