"""Fail when the rendered book loads any script or stylesheet from outside the build, or holds a
table too wide to read without scrolling sideways.

The book must work offline: charts are SVG, MathJax is served from _static. A table must show all
its columns in the article column of a 1,400 px window (about 54 em of this module's estimate:
book.css and the theme's two sidebars), so that the column that makes its point is never the one scrolled out of
sight. Usage: `python -m biasaudit.book.check_html _build/html`.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

REMOTE = re.compile(r"""<(script|link)\b[^>]*\b(src|href)\s*=\s*["'](https?:)?//[^"']+["']""", re.IGNORECASE)


def remote_assets(html_dir: Path) -> list[str]:
    """'file: tag' for every <script src> or <link href> pointing off-site (links in text are fine)."""
    found = []
    for page in sorted(html_dir.rglob("*.html")):
        for match in REMOTE.finditer(page.read_text(encoding="utf-8", errors="replace")):
            tag = match.group(0)
            if match.group(1).lower() == "link" and not re.search(r"rel\s*=\s*[\"']?(stylesheet|preload|modulepreload)", tag):
                continue
            found.append(f"{page.relative_to(html_dir)}: {tag}")
    return found


# The article column of a 1,400 px window, in the em of this estimate: measured in headless Chromium
# on the default run's book (47 tables), a table's cell output is 772 px wide; every table estimated
# at up to 55 em fitted and every one from 56 em overflowed (about 14 px per estimated em), so the
# limit keeps a margin below that. The width of one cell's padding is 0.6 em a side
# (report._CELL_STYLE).
ARTICLE_EM = 54.0
CELL_PADDING_EM = 1.2
# Where a browser may break a line inside a cell: spaces, and after a hyphen or a dash.
_BREAKS = re.compile(r"\s+|(?<=[-‐-—/])")


class _Tables(HTMLParser):
    """The text of every cell of every <table>, row by row (nested tables are not used in the book)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables and self.tables[-1]:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _word_em(word: str) -> float:
    """The width of an unbreakable run of text, in em: about 0.56 em a Latin letter (the book's sans
    serif), 1 em a wide (CJK, Hangul) character, which may break anywhere (so counts alone)."""
    wide = [unicodedata.east_asian_width(c) in "WF" for c in word]
    return 1.0 if any(wide) else 0.56 * len(word)


def min_width_em(rows: list[list[str]]) -> float:
    """The narrowest a browser can lay out a table: each column as wide as its longest unbreakable
    word (header included), plus padding. Wider than the article column means sideways scrolling."""
    widths: dict[int, float] = {}
    for row in rows:
        for column, text in enumerate(row):
            words = [w for w in _BREAKS.split(text) if w]
            widths[column] = max(widths.get(column, 0.0), max((_word_em(w) for w in words), default=0.0))
    return sum(w + CELL_PADDING_EM for w in widths.values())


def wide_tables(html_dir: Path, limit_em: float = ARTICLE_EM) -> list[str]:
    """'page: table N (its first header cells) needs W em' for every table wider than `limit_em`."""
    found = []
    for page in sorted(html_dir.rglob("*.html")):
        parser = _Tables()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for number, rows in enumerate(parser.tables, 1):
            width = min_width_em(rows)
            if width > limit_em:
                header = ", ".join(c.strip() for c in rows[0][:4]) if rows else ""
                found.append(f"{page.relative_to(html_dir)}: table {number} ({header}, ...) needs {width:.0f} em "
                             f"of {limit_em:.0f}")
    return found


def main(argv: list[str]) -> int:
    html_dir = Path(argv[0] if argv else "_build/html")
    if not html_dir.is_dir():
        print(f"{html_dir}: no rendered book here; run `make book` first", file=sys.stderr)
        return 2
    found = remote_assets(html_dir)
    for line in found:
        print(f"remote asset: {line}", file=sys.stderr)
    wide = wide_tables(html_dir)
    for line in wide:
        print(f"table too wide for a 1,400 px window: {line}", file=sys.stderr)
    print(f"{html_dir}: {len(found)} remote script/stylesheet reference(s), {len(wide)} table(s) too wide to read "
          "without scrolling")
    return 1 if found or wide else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
