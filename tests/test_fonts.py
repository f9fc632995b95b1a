"""The book's web fonts: each script's characters go to its own font, every subset holds exactly the
characters it serves (and the shaping tables a script needs), keeps its licence notice under a
name of its own, and the stylesheet and the charts point at them. (The fonts of a whole built
book are checked in tests/test_notebooks.py.)"""

from __future__ import annotations

import base64
import re

import pytest
from biasaudit.book import fonts
from fontTools.ttLib import TTFont

LATIN = "Hé said ‘no’ — “fine”… × −"
ARABIC = "مرحبا بالعالم"
DEVANAGARI = "नमस्ते क्षत्रिय"
HANGUL = "안녕하세요"
HAN = "你好世界"


def _cmap(path) -> set[str]:
    return {chr(c) for c in TTFont(str(path)).getBestCmap()}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fonts")
    text = set(LATIN + ARABIC + DEVANAGARI + HANGUL + HAN)
    return folder, fonts.write_fonts(text, folder)


def test_each_script_goes_to_its_own_font_and_nothing_else(written):
    folder, rows = written
    by_family = {}
    for row in rows:
        by_family.setdefault(row["family"], set()).update(_cmap(folder / row["file"]))
    assert set(by_family) == {"Audit Sans", "Audit Arabic", "Audit Devanagari", "Audit Hangul", "Audit Han"}
    assert by_family["Audit Sans"] == set(LATIN)
    assert by_family["Audit Arabic"] == set(ARABIC.replace(" ", "")) | set(fonts.JOINERS + "\u0640")
    assert by_family["Audit Devanagari"] == set(DEVANAGARI.replace(" ", "")) | set(fonts.JOINERS + "\u25cc")
    assert by_family["Audit Hangul"] == set(HANGUL)
    # A CJK font draws Latin quotes full-width: they must come from the Latin font, never from Han.
    assert by_family["Audit Han"] == set(HAN) and not by_family["Audit Han"] & set("‘’“”")
    assert {(r["family"], r["weight"], r["style"]) for r in rows if r["family"] == "Audit Sans"} == {
        ("Audit Sans", "400", "normal"), ("Audit Sans", "700", "normal"),
        ("Audit Sans", "400", "italic"), ("Audit Sans", "700", "italic")}


def test_subsets_are_small_woff2_with_shaping_tables(written):
    folder, rows = written
    for row in rows:
        data = (folder / row["file"]).read_bytes()
        assert data[:4] == b"wOF2" and row["bytes"] == len(data) < 200_000, row
    deva = TTFont(str(folder / next(r["file"] for r in rows if r["family"] == "Audit Devanagari")))
    arabic = TTFont(str(folder / next(r["file"] for r in rows if r["family"] == "Audit Arabic")))
    for font in (deva, arabic):
        assert "GSUB" in font and "GPOS" in font
        # Conjuncts, half forms and joining forms are glyphs no character maps to directly.
        assert len(font.getGlyphOrder()) > len(font.getBestCmap()) + 1


def test_subsets_keep_the_licence_under_a_name_of_their_own(written):
    folder, rows = written
    for row in rows:
        names = TTFont(str(folder / row["file"]))["name"]
        assert names.getDebugName(1) == row["family"]
        assert "Source" not in names.getDebugName(4) and "Noto" not in names.getDebugName(4)
        assert "Open Font License" in names.getDebugName(13)
        assert names.getDebugName(0), "the copyright notice stays"


def test_a_script_the_pages_do_not_use_gets_no_file_and_no_place_in_the_stack(tmp_path):
    rows = fonts.write_fonts(set("Only English here. " + HAN), tmp_path)
    assert {r["family"] for r in rows} == {"Audit Sans", "Audit Han"}
    css = fonts.stylesheet(rows)
    assert css.count("@font-face") == len(rows) == len(list(tmp_path.glob("*.woff2")))
    stack = re.search(r"--pst-font-family-base: ([^;]+);", css).group(1)
    assert stack == '"Audit Sans", "Audit Han", var(--pst-font-family-base-system)'
    assert 'font-style: italic' in css and all(f'url("fonts/{r["file"]}")' in css for r in rows)


def test_charts_get_the_text_font_embedded(tmp_path):
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text font-family="sans-serif">'
           "drop (English − language) δ</text></svg>")
    (tmp_path / "chart.svg").write_text(svg, encoding="utf-8")
    (tmp_path / "other.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"></svg>', encoding="utf-8")
    assert fonts.embed_in_charts(tmp_path) == 1
    out = (tmp_path / "chart.svg").read_text(encoding="utf-8")
    assert out.startswith('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><defs><style>@font-face')
    assert 'font-family="Audit Sans, sans-serif"' in out and 'font-family="sans-serif"' not in out
    data = base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)", out).group(1))
    (tmp_path / "embedded.woff2").write_bytes(data)
    assert set("drop (English − language) δ") <= _cmap(tmp_path / "embedded.woff2")
    assert (tmp_path / "other.svg").read_text(encoding="utf-8") == '<svg xmlns="http://www.w3.org/2000/svg"></svg>'
