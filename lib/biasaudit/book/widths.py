"""How wide a table is at its narrowest, in CSS pixels, measured with the book's own fonts.

A reader sees a table cut off when it is wider than the page's text column. The text column of the
book's theme at a 1,280 px window is 688 px (both sidebars shown; measured in Chromium): that is the
width every table must fit (`TEXT_COLUMN_PX`). A table can be no narrower than the sum of its
columns' narrowest widths, and a column no narrower than its widest unbreakable run of text (plus
the cell's padding). The runs are measured with the advance widths of the fonts the book ships
(`book.fonts`), so the estimate agrees with what Chromium lays out to a few pixels; `report.readable`
uses it to split a table that would not fit before the page is built, and `check_html` to check the
build where no browser is at hand (with one, it measures the rendered page itself).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Iterable

from fontTools.ttLib import TTFont

from biasaudit.book.fonts import BOOK_FONTS, FAMILIES, font_source

# The reader's window and the text column it leaves (sphinx-book-theme with both sidebars: 624 px at
# 1,200 px, 688 px at 1,280, 784 px at 1,400; measured in Chromium on the rendered book).
READER_WINDOW_PX = 1280
TEXT_COLUMN_PX = 688.0
# _static/book.css: table cells are 0.9 of the page's 16 px, padded 0.5 em a side; the theme collapses borders.
CELL_FONT_PX = 14.4
CELL_PADDING_PX = 2 * 0.5 * CELL_FONT_PX
BORDER_SPACING_PX = 0.0

# Where a line may break inside a cell (Chromium, Unicode line breaking): at spaces, and after a
# hyphen or dash between two letters or digits ("gemma3-|270m"; a minus sign, as in "-0.24", never).
_SPACES = re.compile(r"\s+")
_AFTER_DASH = re.compile(r"(?<=[^\W_][-‐‑–—])(?=[^\W_])")


def _breaks_anywhere(char: str) -> bool:
    """Han, kana and full-width forms break between any two characters (Korean does not: its cells
    keep words whole, `report.readable`)."""
    return unicodedata.east_asian_width(char) in "WF" and not _hangul(char)


def _hangul(char: str) -> bool:
    return 0xAC00 <= ord(char) <= 0xD7AF or 0x1100 <= ord(char) <= 0x11FF or 0x3130 <= ord(char) <= 0x318F


def runs(text: str) -> list[str]:
    """The pieces of `text` a browser never breaks inside."""
    pieces: list[str] = []
    for word in _SPACES.split(text):
        for part in _AFTER_DASH.split(word):
            run = ""
            for char in part:
                if _breaks_anywhere(char):
                    if run:
                        pieces.append(run)
                    pieces.append(char)
                    run = ""
                else:
                    run += char
            if run:
                pieces.append(run)
    return [p for p in pieces if p]


@functools.lru_cache(maxsize=None)
def _metrics(bold: bool) -> list[tuple[tuple[tuple[int, int], ...], dict[int, float]]]:
    """Per book font in the page's font stack order: (its code-point ranges, code point -> advance in em)."""
    chosen = []
    for family in FAMILIES:
        fonts = [f for f in BOOK_FONTS if f.family == family and f.style == "normal"]
        font = next((f for f in fonts if f.weight == ("700" if bold else "400")), fonts[0])
        loaded = TTFont(str(font_source(font)), lazy=True)
        cmap, hmtx = loaded.getBestCmap(), loaded["hmtx"]
        units = loaded["head"].unitsPerEm
        chosen.append((font.ranges, {code: hmtx[glyph][0] / units for code, glyph in cmap.items()}))
    return chosen


def char_em(char: str, bold: bool = False) -> float:
    """The advance of one character in em, in the first book font that serves it (as the page's font
    stack picks it); 0.6 em where none has it."""
    code = ord(char)
    fonts = _metrics(bold)
    for ranges, advances in fonts:
        if ranges and any(low <= code <= high for low, high in ranges) and code in advances:
            return advances[code]
    for ranges, advances in fonts:
        if not ranges and code in advances:
            return advances[code]
    return 1.0 if unicodedata.east_asian_width(char) in "WF" else 0.6


def text_px(text: str, bold: bool = False, font_px: float | None = None) -> float:
    return sum(char_em(c, bold) for c in text) * (CELL_FONT_PX if font_px is None else font_px)


def narrowest_px(text: str, bold: bool = False, font_px: float | None = None) -> float:
    """The width of the widest unbreakable run of `text`: the narrowest a cell holding it can be."""
    return max((text_px(run, bold, font_px) for run in runs(text)), default=0.0)


def column_widths(header: Iterable[str], rows: Iterable[Iterable[str]], header_rows: int = 1) -> list[float]:
    """Each column's narrowest width in px, padding included: `header` (bold) and the body rows."""
    widths = [narrowest_px(str(text), bold=True) for text in header]
    for row in rows:
        for column, text in enumerate(row):
            if column >= len(widths):
                widths.append(0.0)
            widths[column] = max(widths[column], narrowest_px(str(text)))
    return [w + CELL_PADDING_PX for w in widths]


def table_px(widths: list[float]) -> float:
    """A table's narrowest width from its columns': the columns and the spacing around them."""
    return sum(widths) + BORDER_SPACING_PX * (len(widths) + 1)
