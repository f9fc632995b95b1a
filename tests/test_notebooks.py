"""Every chapter runs end to end on the quick CI run (params/ci.yml: 14 base items, a tiny random
model made on the spot), in a temporary runs folder, and the book renders with every warning an
error. Independent of test order and of any earlier `make book`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from biasaudit.check_html import remote_assets
from biasaudit.fonts import BOOK_FONTS, font_source, page_characters
from fontTools.ttLib import TTFont
from biasaudit.released import find_released
from biasaudit.released_study import part_chapters
from biasaudit.run_book import analysis_notebooks, run
from biasaudit.sweep import network_guard

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ci_book(tmp_path_factory):
    """The CI run's executed notebooks in a book folder of their own, and the time of each chapter."""
    book = tmp_path_factory.mktemp("book")
    guard = tmp_path_factory.mktemp("no_network")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIASAUDIT_RUNS_DIR", str(book / "runs"))
        # Every chapter runs in a kernel that may not reach the network (the sweep's guard refuses and
        # logs any connection beyond this machine; the kernel's own sockets are local).
        for key, value in network_guard(guard).items():
            patch.setenv(key, value)
        timings = run(ROOT / "params" / "ci.yml", out_dir=book / "book" / "analyses",
                      released_dir=book / "book" / "released")
    print("time per chapter:", ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings))
    attempts = (guard / "attempts.log").read_text() if (guard / "attempts.log").exists() else ""
    assert not attempts, f"a chapter tried to reach the network: {attempts[:500]}"
    guarded = (guard / "attempts.log.guarded").read_text().split()
    assert len(set(guarded)) >= len(timings), "every chapter's kernel ran under the guard"
    return book, dict(timings)


def _errors(path: Path) -> list[str]:
    notebook = nbformat.read(path, as_version=4)
    return [o.get("ename", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


def test_every_chapter_runs_and_glues_what_its_prose_quotes(ci_book):
    book, timings = ci_book
    main = [name for name in timings if not name.startswith("released/")]
    assert sorted(main) == sorted(analysis_notebooks())
    for name in main:
        notebook = nbformat.read(book / "book" / "analyses" / f"{name}.ipynb", as_version=4)
        outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], name
        glued = {o["metadata"]["scrapbook"]["name"] for o in outputs if "scrapbook" in o.get("metadata", {})}
        quoted = {ref.split(":")[0] for c in notebook.cells if c.cell_type == "markdown"
                  for ref in _glue_references(c.source)}
        assert quoted <= glued, f"{name}: the prose quotes {sorted(quoted - glued)}, which the chapter never glues"
        # {glue:text} pastes plain text: Markdown in a glued sentence would show as literal backticks.
        marked = {o["metadata"]["scrapbook"]["name"] for o in outputs if "scrapbook" in o.get("metadata", {})
                  and "`" in o["data"].get("application/papermill.record/text/plain", "")}
        assert not quoted & marked, f"{name}: glued prose {sorted(quoted & marked)} holds Markdown code spans"


def _glue_references(markdown: str) -> list[str]:
    import re

    return re.findall(r"\{glue:text\}`([^`]+)`", markdown)


def test_the_injected_parameters_are_hidden_and_listed_once(ci_book):
    book, _ = ci_book
    notebook = nbformat.read(book / "book" / "analyses" / "10_language_drops.ipynb", as_version=4)
    injected = [c for c in notebook.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and all("remove-cell" in c.metadata["tags"] for c in injected)
    page = (book / "book" / "analyses" / "parameters.md").read_text()
    assert "`run_name` | `'ci'` | set in the file" in page and "`alpha` | `0.05` | default" in page


def test_the_book_renders_with_warnings_as_errors(ci_book):
    book, _ = ci_book
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, book / name)
    for name in ("intro.md", "methods.md"):
        shutil.copy(ROOT / "book" / name, book / "book" / name)
    shutil.copytree(ROOT / "_static", book / "_static", dirs_exist_ok=True)
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", str(book), "-W", "-n", "--keep-going"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = book / "_build" / "html"
    assert not remote_assets(html)
    page = (html / "book" / "analyses" / "10_language_drops.html").read_text()
    assert ".svg\"" in page, "charts are SVG images built offline"
    assert "report = chapter.report" not in page, "glue and import cells are hidden"
    # The fonts: every character of the pages that one of the book's fonts can draw is in the subsets
    # the build wrote, and every page links the stylesheet that declares them.
    assert '_static/fonts.css"' in page and '_static/book.css' in page
    subsets = list((html / "_static" / "fonts").glob("*.woff2"))
    drawn = set().union(*({chr(c) for c in TTFont(str(p)).getBestCmap()} for p in subsets))
    drawable = set().union(*({chr(c) for c in TTFont(str(font_source(f)), lazy=True).getBestCmap()}
                             for f in BOOK_FONTS))
    needed = {c for c in page_characters(html) if ord(c) > 127} & drawable
    assert needed - drawn == set() and any("\u4e00" <= c <= "\u9fff" for c in needed), "Chinese items are shown"
    # Chapter 31 reads LangBiTe's files from the mirror: its human Catalan translations with a renamed
    # placeholder are listed, as written.
    translation_page = (html / "book" / "analyses" / "31_template_translation.html").read_text(encoding="utf-8")
    assert "{RELIGIÓ1}" in translation_page and "not on this machine" not in translation_page
    # Text from data renders as text: the CI bank's w-gender-001/en holds <b>, ** and <script> on purpose.
    items_page = (html / "book" / "analyses" / "00_items.html").read_text(encoding="utf-8")
    assert "the &lt;b&gt;mango&lt;/b&gt; tree needed **watering** &lt;script&gt;alert(1)&lt;/script&gt;." in items_page
    assert "<script>alert(1)" not in items_page and "<strong>watering" not in items_page
    # Search finds a language by name: the verdict page names each language in its prose.
    index = (html / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(index[index.index("(") + 1:index.rindex(")")])
    pages = index["terms"]["swahili"]
    pages = [index["docnames"][i] for i in (pages if isinstance(pages, list) else [pages])]
    assert "book/analyses/22_verdict" in pages and "book/methods" in pages, pages
    chart = next((html / "_images").glob("*.svg")).read_text(encoding="utf-8")
    assert "@font-face" in chart and 'font-family="sans-serif"' not in chart


def test_the_released_part_runs_where_the_scores_are_at_hand_and_says_how_to_get_them_elsewhere(ci_book):
    book, timings = ci_book
    folder = book / "book" / "released"
    index = (folder / "index.md").read_text()
    source = find_released()
    if source is None:
        assert not [name for name in timings if name.startswith("released/")]
        assert "make released" in index and not list(folder.glob("*.ipynb"))
        return
    chapters = part_chapters(analysis_notebooks())
    assert sorted(name for name in timings if name.startswith("released/")) == sorted(f"released/{n}" for n in chapters)
    for name in chapters:
        assert not _errors(folder / f"{name}.ipynb"), name
    # The released run rescoring nothing, chapter 20's sections say so once each, with no empty table.
    errors_page = nbformat.read(folder / "20_label_errors.ipynb", as_version=4)
    assert "no rows for this table" not in nbformat.writes(errors_page)
    verdict = nbformat.read(folder / "22_verdict.ipynb", as_version=4)
    assert any(c.source.startswith("# ") and c.source.split("\n")[0].endswith("(released study)")
               for c in verdict.cells if c.cell_type == "markdown")
    # The side-by-side table has one row per language of either run, each with a verdict from the rule.
    rows = [line for line in index.splitlines() if line.startswith("| ") and "verdict" not in line]
    side = [r for r in rows if r.count("|") == 4 and not r.startswith("| `") and not r.startswith("| language")]
    verdicts = {"real shift", "within noise", "too little power to tell", "models disagree", "not in this run"}
    assert side and all({cell.strip() for cell in r.strip("|").split("|")[1:]} <= verdicts for r in side), side
    assert {r.split("|")[1].strip() for r in side} >= {"Spanish (es)", "Chinese (zh)", "Swahili (sw)"}
