"""Check the rendered book as a reader gets it: `python -m biasaudit.book.check_html _build/html`.

`make book` fails on a defect a reader would meet, and on nothing else:

- a script or stylesheet loaded from outside the build (the book must work offline: charts are SVG,
  MathJax is served from _static);
- a table, chart or image wider than the text column of a 1,280 px window (688 px: a reader would see
  it cut off, or have to scroll it sideways to reach its last columns);
- a chart label cut short with "…" (a legend or axis label the chart had no room for);
- an image whose alt text is missing or is only its file name (a screen reader reads it aloud);
- a broken sentence: a plural left as "(s)", doubled punctuation, an empty value, markup never rendered,
  a path of the build machine, two sentences glued into one, a value shown with two different intervals
  on two pages (`check_text`).

Each page is laid out in Chromium (the system's, else Playwright's own) at that window width, with
every folded solution and input opened. Where no Chromium is on the machine, tables are checked by
their estimated narrowest width instead (`widths`, the book's own fonts) and the output says so.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import sys
import threading
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from playwright.sync_api import sync_playwright

from biasaudit.book import widths
from biasaudit.book.check_text import disagreeing_intervals, text_defects

REMOTE = re.compile(r"""<(script|link)\b[^>]*\b(src|href)\s*=\s*["'](https?:)?//[^"']+["']""", re.IGNORECASE)
# Pages of Sphinx's own (search, the general index) hold no content of the book's.
SPHINX_PAGES = ("search.html", "genindex.html", "py-modindex.html")
# An image's alt text that says nothing: empty, or its own file name or path.
PATH_LIKE = re.compile(r"^\s*$|[/\\]|\.(svg|png|jpe?g|gif|webp)\s*$", re.IGNORECASE)
# A label a chart shortened (Vega's labelLimit and limit end the text with an ellipsis).
CUT_LABEL = re.compile(r"<text\b[^>]*>([^<]*…)</text>")


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


REDIRECT = re.compile(r"<meta[^>]+http-equiv=[\"']?refresh", re.IGNORECASE)


def book_pages(html_dir: Path) -> list[Path]:
    """The book's own pages (not Sphinx's search and index pages, nor a page that only redirects, nor one an
    earlier build left whose source is gone: a part this build did not make)."""
    return [p for p in sorted(html_dir.rglob("*.html"))
            if p.name not in SPHINX_PAGES and "_static" not in p.parts and "_sources" not in p.parts
            and has_source(p, html_dir)
            and not REDIRECT.search(p.read_text(encoding="utf-8", errors="replace")[:2000])]


def has_source(page: Path, html_dir: Path) -> bool:
    """Whether the page's source is still in the book (a folder that is not a book's build keeps every page)."""
    root = html_dir.resolve().parent.parent
    if not (root / "_toc.yml").is_file():
        return True
    stem = root / page.relative_to(html_dir).with_suffix("")
    return any(stem.with_suffix(suffix).is_file() for suffix in (".md", ".ipynb", ".rst"))


def cut_chart_labels(html_dir: Path) -> list[str]:
    """'page: label' for every label an SVG chart of a page (an image it shows, or one inline) shortened."""
    found = []
    for page in book_pages(html_dir):
        text = page.read_text(encoding="utf-8", errors="replace")
        sources = [page] + [(page.parent / src).resolve() for src in re.findall(r'<img\b[^>]*\bsrc="([^"]+\.svg)"', text)]
        for source in dict.fromkeys(sources):
            if not source.is_file():
                continue
            for match in CUT_LABEL.finditer(source.read_text(encoding="utf-8", errors="replace")):
                where = "" if source == page else f" (chart {source.name})"
                found.append(f"{page.relative_to(html_dir)}{where}: a chart label cut short: {match.group(1)!r}")
    return found


# --------------------------------------------------------------------------------------------
# Without a browser: the tables' narrowest widths, estimated with the book's fonts
# --------------------------------------------------------------------------------------------


class _Tables(HTMLParser):
    """The text of every cell of every <table>, row by row, header rows apart (nested tables are not
    used in the book). Text in <code> is counted in monospace: its characters as wide as "0"."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[list[tuple[bool, str]]]] = []
        self._cell: list[str] | None = None
        self._header = False
        self._code = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "table":
            self.rows.append([])
        elif tag == "tr" and self.rows:
            self.rows[-1].append([])
        elif tag in ("td", "th") and self.rows and self.rows[-1]:
            self._cell, self._header = [], tag == "th"
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")
        elif tag == "code":
            self._code += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1][-1].append((self._header, "".join(self._cell)))
            self._cell = None
        elif tag == "code":
            self._code = max(0, self._code - 1)

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            # monospace: every character as wide as a digit of the sans serif, which is about as wide
            self._cell.append(re.sub(r"\S", "0", data) if self._code else data)


def estimated_wide_tables(html_dir: Path, limit: float = widths.TEXT_COLUMN_PX) -> list[str]:
    """'page: table N (its first header cells) needs W px of L' for every table whose narrowest layout,
    estimated with the book's fonts, is wider than the text column."""
    found = []
    for page in book_pages(html_dir):
        parser = _Tables()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for number, rows in enumerate(parser.rows, 1):
            column: dict[int, float] = {}
            for row in rows:
                for k, (header, text) in enumerate(row):
                    column[k] = max(column.get(k, 0.0), widths.narrowest_px(text, bold=header))
            width = widths.table_px([w + widths.CELL_PADDING_PX for w in column.values()])
            if width > limit:
                header = ", ".join(text.strip() for _, text in rows[0][:4]) if rows else ""
                found.append(f"{page.relative_to(html_dir)}: table {number} ({header}, ...) needs about {width:.0f} px "
                             f"of the {limit:.0f} px text column")
    return found


# --------------------------------------------------------------------------------------------
# With a browser: every page laid out at the reader's window width
# --------------------------------------------------------------------------------------------

# Opens what a reader can open (solutions, folded inputs), waits for the explorable charts to draw, then
# lists what sticks out of the text column, and images with no description.
_LAYOUT = """async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  if (document.querySelector('div.ba-explore')) {
    for (let i = 0; i < 100 && document.querySelector('div.ba-explore:not([data-live="yes"])'); i++) {
      await new Promise(r => setTimeout(r, 100));
    }
  }
  await document.fonts.ready;
  const article = document.querySelector('article.bd-article');
  if (!article) return {column: 0, found: []};
  const style = getComputedStyle(article), box = article.getBoundingClientRect();
  const left = box.left + parseFloat(style.paddingLeft), right = box.right - parseFloat(style.paddingRight);
  const found = [];
  const label = (el) => {
    const row = el.querySelector && el.querySelector('tr');
    const text = row ? row.innerText : (el.getAttribute && (el.getAttribute('alt') || el.getAttribute('aria-label'))) || '';
    return text.replace(/\\s+/g, ' ').trim().slice(0, 70);
  };
  const wide = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && (r.right > right + 1 || r.left < left - 1); };
  article.querySelectorAll('table').forEach((t, i) => {
    if (wide(t)) found.push(`table ${i + 1} (${label(t)}) is ${Math.round(t.getBoundingClientRect().width)} px wide`);
  });
  article.querySelectorAll('img, div.ba-explore-live svg, div.ba-explore-live canvas, div.ba-explore-static svg').forEach(el => {
    if (wide(el) && el.offsetParent !== null) found.push(`${el.tagName.toLowerCase()} (${label(el) || el.getAttribute('src') || 'a chart'}) is ${Math.round(el.getBoundingClientRect().width)} px wide`);
  });
  article.querySelectorAll('img').forEach(img => {
    if (img.naturalWidth > 100000)
      found.push(`chart ${img.getAttribute('src')} has no size: it draws nothing`);
    else if (img.naturalWidth > right - left + 1 && img.offsetParent !== null)
      found.push(`chart ${img.getAttribute('src')} is drawn ${img.naturalWidth} px wide and shrunk to fit (its text reads smaller)`);
    const alt = img.getAttribute('alt');
    if (alt === null || /^\\s*$|[\\/\\\\]|\\.(svg|png|jpe?g|gif|webp)\\s*$/i.test(alt))
      found.push(`image ${img.getAttribute('src')} has no description as alt text (alt=${JSON.stringify(alt)})`);
  });
  return {column: Math.round(right - left), found: found};
}"""


@dataclass(frozen=True)
class Layout:
    """What the browser found: defects as 'page: what', and the text column's width it measured."""

    defects: list[str]
    column_px: int


def find_chromium() -> str | None:
    """A Chromium to lay the pages out with: the system's, else the one Playwright downloads
    (`.venv/bin/playwright install chromium`); None where there is neither."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    with sync_playwright() as playwright:
        bundled = Path(playwright.chromium.executable_path)
    return str(bundled) if bundled.exists() else None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def browser_layout(html_dir: Path, browser: str, window_px: int = widths.READER_WINDOW_PX,
                   pages: list[Path] | None = None) -> Layout:
    """Lay every page out in Chromium at `window_px` and list what a reader would see cut off or
    undescribed. The pages are served on 127.0.0.1 (module scripts do not run from file:// pages), and
    every request off this machine is refused, as the book must work offline."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    local = f"http://127.0.0.1:{server.server_address[1]}/"
    defects: list[str] = []
    column = 0
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=browser, args=["--no-sandbox"])
            page = chromium.new_page(viewport={"width": window_px, "height": 900})
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(local) else route.abort())
            for path in pages if pages is not None else book_pages(html_dir):
                name = path.relative_to(html_dir).as_posix()
                page.goto(local + name, wait_until="load")
                found = page.evaluate(_LAYOUT)
                column = min(column or found["column"], found["column"] or column)
                defects += [f"{name}: {what} in a {found['column']} px text column" if " px wide" in what
                            else f"{name}: {what}" for what in found["found"]]
            chromium.close()
    finally:
        server.shutdown()
    return Layout(defects, column)


def main(argv: list[str]) -> int:
    html_dir = Path(argv[0] if argv else "_build/html")
    if not html_dir.is_dir():
        print(f"{html_dir}: no rendered book here; run `make book` first", file=sys.stderr)
        return 2
    found = [f"remote asset: {line}" for line in remote_assets(html_dir)]
    found += cut_chart_labels(html_dir)
    found += text_defects(book_pages(html_dir), html_dir)
    found += disagreeing_intervals(book_pages(html_dir), html_dir)
    browser = find_chromium()
    if browser is not None:
        layout = browser_layout(html_dir, browser)
        found += layout.defects
        how = f"laid out in Chromium at a {widths.READER_WINDOW_PX} px window ({layout.column_px} px text column)"
    else:
        found += [f"table too wide: {line}" for line in estimated_wide_tables(html_dir)]
        how = ("tables estimated with the book's fonts: no Chromium on this machine to lay the pages out in "
               "(`apt-get install chromium`, or `.venv/bin/playwright install chromium`, adds the full check)")
    for line in found:
        print(line, file=sys.stderr)
    print(f"{html_dir}: {len(book_pages(html_dir))} pages {how}: {len(found)} defect(s) a reader would see")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
