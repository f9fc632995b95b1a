"""The rendered pages' text, read as a reader reads it: what a broken sentence looks like on a page.

The book's sentences are assembled from many small functions and glued values, each tested alone; this
reads the page they make. A rule flags what reads wrong to any reader, whatever produced it:

- a plural left to the reader ("2 model(s)");
- doubled or stray punctuation ("fence..", ".;", "home.;"), a space before a full stop or comma (an
  empty glued value: "is ." or "with , and");
- "nan", "NaN", "None" or "null" shown as a value;
- markup or placeholders that were never rendered (`{glue:`, `{term}`, `**`, `` ` ``, `:::`, `{{`);
- a path of the machine that built the book (/tmp/..., /root/..., /home/..., site-packages);
- a sentence glued from two: the words before a colon repeated after it ("At 0.9: At the threshold"), or
  the same sentence twice in one paragraph;
- an empty paragraph;
- one number, two intervals: a language's value shown with a 95% interval ("0.0552 [0.0155, 0.0944]")
  that another table of the same part (the main run's analyses, the released part) shows for the same
  language with another interval. Read in table rows that name one language (a cell "hi" or "Hindi (hi)"),
  at four decimals (the book's per-language drops; per-model ones have three, and many models' values
  coincide at three). Two quantities of one language equal to four decimals would be flagged too.

Code, charts, formulas and the sidebars are not text a reader reads as prose and are skipped. The rules
approximate: a rule that could flag good prose says so beside it, and none is silenced page by page.
"""

from __future__ import annotations

import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

# Elements whose content is not prose: code blocks, charts, scripts, navigation (skipped); inline code and
# formulas stand in a sentence as a word ("CODE", "MATH"), so the sentence around them is read whole.
SKIP = {"script", "style", "pre", "svg", "nav", "button", "select", "option"}
INLINE = {"code": "CODE", "kbd": "CODE", "samp": "CODE", "math": "MATH", "mjx-container": "MATH"}
BLOCKS = {"p", "li", "td", "th", "dd", "dt", "caption", "h1", "h2", "h3", "h4", "h5", "h6", "figcaption"}

RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("a plural left unresolved", re.compile(r"\w\(s\)")),
    # "e.g.," and "i.e.," are the only full stop and comma that meet in good prose
    ("doubled or stray punctuation", re.compile(r"(?<!\.)\.\.(?!\.)|[;,:][;,]|(?<!e\.g)(?<!i\.e)\.[;,]|;\.|,\.(?!\d)")),
    # "e.g. ." never occurs in the book; a space before a full stop or comma is an empty glued value
    ("a space before a full stop or comma (an empty value?)", re.compile(r"\w\s+[.,](\s|$)")),
    # a value, not the word: the whole cell, or after "is", "was", ":" or "="; ("None of the errors" and "the
    # text “nan”" are prose)
    ("a missing value shown as text",
     re.compile(r"^(?:nan|NaN|None|null)$|(?:[:=]\s*|\b(?:is|was|of)\s)(?:nan|NaN|None|null)(?=$|[\s.,;)])")),
    ("markup that was never rendered", re.compile(r"\{glue:|\{term\}|\*\*|`|:::|\{\{|\}\}")),
    ("a path of the machine that built the book", re.compile(r"(?<![\w.])/(tmp|root|home|Users|work)/|site-packages")),
    # a sentence whose first word opens a new sentence after a colon: "(At 0.9: At the fixed threshold", "The
    # gaps do not move: The gap ranges"; could flag a deliberate repetition, which the book avoids
    ("a sentence glued from two", re.compile(r"(?:^|[(]|[.!?]\s)([A-Z][a-z]*)\b(?:[^:.;()]|\.(?=\d)){0,60}:\s+\1\b")),
)


VOID = {"br", "img", "meta", "input", "hr", "link", "source", "wbr", "col", "area", "base", "embed", "param", "track"}


# What a data table's cells may hold as they are: its items' own texts (the CI bank holds "**" and "<b>" on
# purpose), a missing value left empty by the table but written out by a program's message.
DATA_AS_IS = {"markup that was never rendered", "a missing value shown as text"}


class _Prose(HTMLParser):
    """The text of each block element of a page's article (one string per paragraph, cell, item...)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, bool]] = []  # (text, a cell of a data table)
        self.rows: list[list[str]] = []  # each table row's cells, as read
        self.empty_paragraphs = 0
        self._row: list[str] | None = None
        self._open: list[tuple[str, bool, bool, bool]] = []  # (tag, starts a skip, a block, the article)
        self._tables: list[tuple[str, bool]] = []  # open tables: (tag, a data table of `report.readable`)
        self._skip = 0
        self._article = 0
        self._stack: list[list[str]] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "br" and self._stack and not self._skip:
            self._stack[-1].append(" ")
        if tag in VOID:
            return
        article = tag == "article" and "bd-article" in classes
        if tag == "table":
            self._tables.append(("table", "ba-data" in classes))
        if tag == "tr":
            self._row = []
        self._article += article
        skip = block = False
        if self._article and not self._skip:
            if tag in SKIP:
                skip = True
            elif tag in INLINE or "math" in classes:
                if self._stack:
                    self._stack[-1].append(INLINE.get(tag, "MATH"))
                skip = True
            elif tag in BLOCKS:
                self._stack.append([])
                block = True
        self._skip += skip
        self._open.append((tag, skip, block, article))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID or not any(t == tag for t, *_ in self._open):
            return
        if tag == "table" and self._tables:
            self._tables.pop()
        while self._open:
            name, skip, block, article = self._open.pop()
            self._skip -= skip
            self._article -= article
            if block:
                self._close_block(name)
            if name == "tr" and self._row is not None:
                self.rows.append(self._row)
                self._row = None
            if name == tag:
                break

    def _close_block(self, tag: str) -> None:
        text = re.sub(r"\s+", " ", "".join(self._stack.pop())).strip()
        if text:
            data = tag in ("td", "th") and any(name == "table" and data_table for name, data_table, *_ in self._tables)
            self.blocks.append((text, data))
            if tag in ("td", "th") and self._row is not None:
                self._row.append(text)
            if self._stack:  # a block inside another (a paragraph in a list item) is read once
                self._stack[-1].append(" ")
        elif tag == "p" and not any(name in ("td", "th") for name, *_ in self._open):
            self.empty_paragraphs += 1  # (an empty table cell is a table's own business)

    def handle_data(self, data: str) -> None:
        if self._article and not self._skip and self._stack:
            self._stack[-1].append(data)


def page_defects(text: str) -> list[str]:
    """'what: "…the words around it…"' for every rule a page's prose breaks."""
    parser = _Prose()
    parser.feed(text)
    found = []
    for block, data in parser.blocks:
        for what, rule in RULES:
            if data and what in DATA_AS_IS:
                continue
            match = rule.search(block)  # once per block and rule: the first place shows what to fix
            if match:
                start, end = max(0, match.start() - 40), min(len(block), match.end() + 40)
                found.append(f"{what}: \"…{block[start:end]}…\"")
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", block) if len(s.split()) >= 8]
        repeated = {s for s in sentences if sentences.count(s) > 1}
        found += [f"a sentence twice in one paragraph: \"{s[:80]}…\"" for s in sorted(repeated)]
    if parser.empty_paragraphs:
        found.append(f"{parser.empty_paragraphs} empty {'paragraph' if parser.empty_paragraphs == 1 else 'paragraphs'} "
                     "(a glued value with nothing in it?)")
    return found


def text_defects(pages: list[Path], html_dir: Path) -> list[str]:
    """'page: what' for every page's broken prose."""
    return [f"{page.relative_to(html_dir)}: {defect}" for page in pages
            for defect in page_defects(page.read_text(encoding="utf-8", errors="replace"))]


# A value with its interval: "0.0552 [0.0155, 0.0944]", at four decimals (`disagreeing_intervals`).
VALUE_INTERVAL = re.compile(r"(?<![\d.])(-?\d\.\d{4}) \[(-?\d\.\d{4}), (-?\d\.\d{4})\]")
LANGUAGE_CELL = re.compile(r"^(?:[a-z]{2}|.+ \(([a-z]{2})\))$")


def shown_intervals(text: str) -> list[tuple[str, str, str]]:
    """(language, value, "[low, high]") for every value a page's table rows show with its interval, in
    rows that name exactly one language."""
    parser = _Prose()
    parser.feed(text)
    found = []
    for cells in parser.rows:
        languages = {m.group(1) or m.group(0) for m in map(LANGUAGE_CELL.match, cells) if m}
        if len(languages) == 1:
            language = languages.pop()
            found += [(language, m.group(1), f"[{m.group(2)}, {m.group(3)}]")
                      for m in VALUE_INTERVAL.finditer(" ".join(cells))]
    return found


def disagreeing_intervals(pages: list[Path], html_dir: Path) -> list[str]:
    """'value shown as [a] on page x and as [b] on page y' for every language's value that one part of the
    book (one folder of pages: one run) shows with two different intervals."""
    seen: dict[tuple, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for page in pages:
        for language, value, interval in shown_intervals(page.read_text(encoding="utf-8", errors="replace")):
            where = seen[page.parent, language, value][interval]
            name = page.relative_to(html_dir).as_posix()
            if name not in where:
                where.append(name)
    return [f"one number, two intervals: {language} {value} is shown as "
            + " and as ".join(f"{interval} ({', '.join(names)})" for interval, names in shown.items())
            for (_, language, value), shown in seen.items() if len(shown) > 1]
