"""Every chapter runs end to end on the quick CI run (params/ci.yml: 14 base items, a tiny random
model made on the spot), in a temporary runs folder, and the book renders with every warning an
error. Independent of test order and of any earlier `make book`."""

from __future__ import annotations

import ast
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml
from biasaudit.book import check_html
from biasaudit.book.check_text import shown_intervals
from biasaudit.book.check_html import remote_assets
from biasaudit.book.fonts import BOOK_FONTS, font_source, page_characters
from biasaudit.book.released_part import part_chapters
from biasaudit.book.run_book import ONE_AT_A_TIME, analysis_notebooks, run
from biasaudit.data.downloads import PinnedFile
from biasaudit.analyses.verdict import VERDICTS
from biasaudit.data.release_files import RELEASED_MODELS
from biasaudit.data.released import released_models_in
from biasaudit.run.synthetic import made_up_release
from biasaudit.sweep.harness import network_guard
from fontTools.ttLib import TTFont

ROOT = Path(__file__).resolve().parents[1]


# The released part of the CI book: the paper's ten models, seven languages and four sources in the
# release's own file format, numbers made up (`run.synthetic.made_up_release`: a tenth of its items), with
# permutation and bootstrap counts as small as the CI run's. Its tables and charts have the study's shape.
QUICK_RELEASED = {"n_permutations": 500, "n_bootstrap": 200, "n_runs": 10}


@pytest.fixture(scope="module")
def ci_book(tmp_path_factory):
    """The CI run's executed notebooks in a book folder of their own, with a released part of the paper's
    shape read from a made-up release, and the time of each chapter."""
    book = tmp_path_factory.mktemp("book")
    guard = tmp_path_factory.mktemp("no_network")
    made_up_release(book / "release", RELEASED_MODELS, fraction=0.1)
    released = yaml.safe_load((ROOT / "params" / "released.yml").read_text(encoding="utf-8"))
    (book / "released_quick.yml").write_text(yaml.safe_dump({**released, **QUICK_RELEASED}), encoding="utf-8")
    params = book / "ci.yml"
    params.write_text((ROOT / "params" / "ci.yml").read_text(encoding="utf-8") + f"\nreleased_study: {book / 'release'}"
                      f"\nreleased_params: {book / 'released_quick.yml'}\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIASAUDIT_RUNS_DIR", str(book / "runs"))
        # Every chapter runs in a kernel that may not reach the network (the sweep's guard refuses and
        # logs any connection beyond this machine; the kernel's own sockets are local).
        for key, value in network_guard(guard).items():
            patch.setenv(key, value)
        # No download is tried: any would go to a port where nothing listens.
        patch.setattr(PinnedFile, "url", property(lambda f: f"http://127.0.0.1:9/{f.path}"))
        # Two chapters at a time where they only read stored results, as `make book` runs them.
        timings = run(params, out_dir=book / "book" / "analyses", released_dir=book / "book" / "released", jobs=2)
    print("time per chapter:", ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings))
    shutil.copytree(book / "runs", book / "runs_as_built")  # later tests rerun chapters on runs/ with other params
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
        # {glue:text} pastes plain text: Markdown in a glued sentence would show as literal backticks or stars.
        marked = {o["metadata"]["scrapbook"]["name"] for o in outputs if "scrapbook" in o.get("metadata", {})
                  and any(mark in o["data"].get("application/papermill.record/text/plain", "") for mark in "`*")}
        assert not quoted & marked, f"{name}: glued prose {sorted(quoted & marked)} holds Markdown code or emphasis"


def _glue_references(markdown: str) -> list[str]:
    import re

    return re.findall(r"\{glue:text\}`([^`]+)`", markdown)


def test_every_chapter_that_reads_the_study_declares_every_analysis_option():
    """The book passes a chapter only the parameters it declares. A chapter that reads the run's study without
    declaring, say, n_bootstrap would compute its intervals with the default count while the other pages use
    the run's: one drop, two intervals (chapter 10 did). One that sets the paper's numbers beside the run's
    needs released_scores, or its comparison never shows (chapters 11, 13 and 17 did)."""
    from biasaudit.book.run_book import notebook_parameters
    from biasaudit.core.options import StudyOptions

    checked = []
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        module = re.search(r"from biasaudit\.book\.chapters import (\w+) as chapter", notebook.read_text())
        source = (ROOT / "lib" / "biasaudit" / "book" / "chapters" / f"{module.group(1)}.py").read_text()
        needed = set(StudyOptions.model_fields) if "Study.from_params" in source else set()
        needed |= {"released_scores"} if "paper.paper_files" in source else set()
        missing = needed - set(notebook_parameters(notebook))
        assert not missing, (notebook.name, sorted(missing))
        checked += [notebook.stem] if needed else []
    assert {"10_language_drops", "11_noise_floor", "13_carry_over", "17_summed", "22_verdict"} <= set(checked)


def test_the_injected_parameters_are_hidden_and_listed_once(ci_book):
    book, _ = ci_book
    notebook = nbformat.read(book / "book" / "analyses" / "10_language_drops.ipynb", as_version=4)
    injected = [c for c in notebook.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and all("remove-cell" in c.metadata["tags"] for c in injected)
    page = (book / "book" / "analyses" / "parameters.md").read_text()
    assert "`run_name` | `'ci'` | set in the file" in page and "`alpha` | `0.05` | default" in page


@pytest.fixture(scope="module")
def rendered_book(ci_book):
    """The CI run's book built with every warning an error: (its folder, the build's process result)."""
    book, _ = ci_book
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, book / name)
    for page in (ROOT / "book").glob("*.md"):  # intro, methods, glossary, teaching
        shutil.copy(page, book / "book" / page.name)
    shutil.copytree(ROOT / "_static", book / "_static", dirs_exist_ok=True)
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", str(book), "-W", "-n", "--keep-going"],
                            capture_output=True, text=True)
    return book, result


def test_the_book_renders_with_warnings_as_errors(rendered_book):
    book, result = rendered_book
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = book / "_build" / "html"
    assert not remote_assets(html)
    # What `make book` runs after the build: no table, chart or legend cut off at a 1,280 px window in either
    # part (the released one at the paper's ten models), no chart label shortened, every chart described.
    result = subprocess.run([sys.executable, "-m", "biasaudit.book.check_html", str(html)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-6000:] + result.stdout
    # One number, one value: that check reads something. Each language's drop and interval are shown by
    # chapters 10, 16 and 22 of either part, and the check compared them.
    for part in ("analyses", "released"):
        shown: dict[tuple[str, str], set[str]] = {}
        for page in (html / "book" / part).glob("*.html"):
            for language, value, interval in shown_intervals(page.read_text()):
                shown.setdefault((language, value), set()).add(page.stem)
        on_three = {language for (language, _), pages in shown.items()
                    if {"10_language_drops", "16_faithful", "22_verdict"} <= pages}
        assert on_three >= {"es", "zh", "sw"}, (part, sorted(shown.items())[:10])
    if check_html.find_chromium() is not None:
        assert "laid out in Chromium at a 1280 px window (688 px text column)" in result.stdout, result.stdout
    page = (html / "book" / "analyses" / "10_language_drops.html").read_text()
    assert ".svg\"" in page, "charts are SVG images built offline"
    # The calls behind the page are there for a reader who opens them: each code cell shown is folded away.
    shown_code = re.findall(r'<div class="cell[^"]*tag_hide-input[^"]*"', page)
    folds = page.count('<details class="admonition hide above-input">')
    text = re.sub(r"<[^>]+>", "", page)  # highlighted code is split into spans
    assert len(shown_code) == folds == 2 and "report = chapter.report(" in text, (len(shown_code), folds)
    assert "charts.use_svg()" in text and "run_name: str" not in text, "the parameters cell stays out"
    # The fonts: every character of the pages that one of the book's fonts can draw is in the subsets
    # the build wrote, and every page links the stylesheet that declares them.
    assert '_static/fonts.css"' in page and '_static/book.css' in page
    subsets = list((html / "_static" / "fonts").glob("*.woff2"))
    drawn = set().union(*({chr(c) for c in TTFont(str(p)).getBestCmap()} for p in subsets))
    drawable = set().union(*({chr(c) for c in TTFont(str(font_source(f)), lazy=True).getBestCmap()}
                             for f in BOOK_FONTS))
    needed = {c for c in page_characters(html) if ord(c) > 127} & drawable
    assert needed - drawn == set() and any("\u4e00" <= c <= "\u9fff" for c in needed), "Chinese items are shown"
    # Chapter 31 without LangBiTe's files (a fresh machine) compares the translators against the project's
    # own human translations: the page names them, and its pairing table counts data/templates' English.
    from biasaudit.templates.library import find_langbite

    translation_page = (html / "book" / "analyses" / "31_template_translation.html").read_text(encoding="utf-8")
    english = (ROOT / "data" / "templates" / "templates_en.tsv").read_text(encoding="utf-8").splitlines()[1:]
    if find_langbite() is None:
        assert "human translations in data/templates, in Spanish (es)." in translation_page
        # (a count equal in every row of the table is said once, in its caption)
        assert f">{len(english)}</td>" in translation_page or f"English templates {len(english)}" in translation_page, \
            "the pairing table counts the English templates"
    else:  # LangBiTe's files were downloaded into this machine's cache before
        assert "human Spanish (es) and Catalan (ca) translations, read from" in translation_page
    assert "Not computed" not in translation_page
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


# The pages with explorable charts (biasaudit.book.explore), and what a hover must show on each.
EXPLORABLE_PAGES = ("10_language_drops", "13_carry_over", "22_verdict", "30_template_tests")


def test_explorable_charts_are_in_their_pages_with_one_local_bundle(rendered_book):
    book, result = rendered_book
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = book / "_build" / "html"
    bundle = html / "_static" / "explore.js"
    assert bundle.exists() and bundle.stat().st_size > 500_000
    for name in EXPLORABLE_PAGES:
        page = (html / "book" / "analyses" / f"{name}.html").read_text(encoding="utf-8")
        assert page.count('<div class="ba-explore">') == 1, name
        assert re.search(r'<script[^>]*src="../../_static/explore.js[^"]*"[^>]*type="module"|'
                         r'<script[^>]*type="module"[^>]*src="../../_static/explore.js', page), name
        # the static chart (the fallback where scripts do not run) is inline SVG in the page's fonts
        static = re.search(r'<div class="ba-explore-static">(<svg.*?</svg>)</div>', page, re.S)
        assert static and "Audit" in static.group(1), name
    # the bundle only where a chart needs it
    assert "explore.js" not in (html / "book" / "analyses" / "11_noise_floor.html").read_text(encoding="utf-8")


def _serve(folder: Path):
    """A local HTTP server for `folder` on 127.0.0.1 (module scripts do not run from file:// pages)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _tooltip_after_hover(page, selector: str) -> dict[str, str]:
    """Hover the first mark matching `selector` in the live chart; the tooltip's fields {name: value}."""
    page.mouse.move(0, 0)  # off the chart: the last tooltip goes, so the one read below is this mark's
    page.wait_for_selector("#vg-tooltip-element.visible", state="detached", timeout=10_000)
    mark = page.locator(f"div.ba-explore-live {selector}").first
    mark.scroll_into_view_if_needed()
    # force: the text printed over a heatmap cell lets the pointer through to it; a line of the item list is
    # wrapped over several lines, so the pointer goes on its first line's first letters, not between two lines
    mark.hover(force=True, position={"x": 6, "y": 5} if "mark-text" in selector else None)
    page.wait_for_selector("#vg-tooltip-element.visible", timeout=10_000)
    # vega-tooltip's table: one row per field, its name in td.key and its value in td.value
    return page.eval_on_selector("#vg-tooltip-element", "e => Object.fromEntries([...e.querySelectorAll('tr')]"
                                 ".map(r => [r.querySelector('td.key').textContent, r.querySelector('td.value').textContent]))")


def test_explorable_charts_show_the_item_behind_a_mark_offline(rendered_book, tmp_path, monkeypatch):
    """In Chromium, with every request off this machine refused: each chart goes live from the local
    bundle, and hovering a mark shows the item behind it in English and in translation, as stored."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    book, result = rendered_book
    assert result.returncode == 0, result.stdout[-3000:]
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(book / "runs_as_built"))
    from biasaudit.run.pipeline import read_scores

    scores = read_scores("ci")
    texts = scores.drop_duplicates("item_id").set_index("item_id")
    responses = pd.read_parquet(book / "runs_as_built" / "ci" / "steps" / "template_tests" / "responses.parquet")
    server = _serve(book / "_build" / "html")
    refused: list[str] = []
    try:
        with sync_api.sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=browser, args=["--no-sandbox"])
            page = chromium.new_page(viewport={"width": 1400, "height": 1000})
            local = f"http://127.0.0.1:{server.server_port}/"
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(local)
                       else (refused.append(route.request.url), route.abort()))
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            for name in EXPLORABLE_PAGES:
                page.goto(f"{local}book/analyses/{name}.html")
                page.wait_for_selector('div.ba-explore[data-live="yes"]', timeout=30_000)
                page.screenshot(path=str(tmp_path / f"{name}.png"))
                if name == "30_template_tests":  # the last cell: a language after English
                    shown = _tooltip_after_hover(page, "g.mark-rect.role-mark path >> nth=-1")
                    assert shown["language"] != "English (en)", shown
                    assert shown["prompt"] in set(responses["prompt_text"]) and shown["prompt"] != shown["English prompt"]
                    assert shown["English prompt"] in set(responses["prompt_text"]), shown
                    assert shown["reply"] in set(responses["reply"]) and shown["verdict"], shown
                    continue
                if name == "13_carry_over":
                    shown = _tooltip_after_hover(page, "g.mark-symbol.role-mark path")
                else:  # a heatmap cell's numbers, then a line of the item list under it
                    cell = _tooltip_after_hover(page, "g.mark-rect.role-mark path")
                    assert {"model", "language", "drop", "q"} <= set(cell), cell
                    page.locator("div.ba-explore-live g.mark-rect.role-mark path").first.click(force=True)
                    shown = _tooltip_after_hover(page, "g.mark-text.role-mark text >> nth=-1")
                english = texts.loc[texts["base_id"].eq(shown["item"]) & texts["variant"].eq("original")].iloc[0]
                assert shown["English"] == english["context"], (name, shown)
                translated = texts.loc[texts["base_id"].eq(shown["item"]) & texts["variant"].eq("translation")]
                assert shown["translated"] in set(translated["context"]), (name, shown)
                font = page.eval_on_selector("#vg-tooltip-element", "e => getComputedStyle(e).fontFamily")
                assert "Audit" in font, font  # the book's own fonts, which cover every script it shows
            chromium.close()
    finally:
        server.shutdown()
    # (jupyter-book 1 writes sphinx-thebe's configuration script twice on every page; the build keeps one,
    # so no page stops with "THEBE_JS_URL has already been declared")
    assert not errors, errors
    assert not refused, f"the pages asked for something off this machine: {refused[:5]}"


def test_the_released_part_runs_every_results_chapter_at_the_papers_shape(ci_book):
    book, timings = ci_book
    folder = book / "book" / "released"
    index = (folder / "index.md").read_text()
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
    side = [r for r in rows if r.count("|") == 5 and not r.startswith("| `") and not r.startswith("| language")]
    verdicts = {*VERDICTS, "not in this run"}
    assert side and all({cell.strip() for cell in r.strip("|").split("|")[1:3]} <= verdicts for r in side), side
    assert all(r.strip("|").split("|")[3].strip() in ("clearly exceeds rewording", "no such claim") for r in side)
    assert released_models_in(book / "release") == sorted(RELEASED_MODELS)
    assert "The part has all ten of the paper's models" in index and "released_quick.yml" in index
    assert {r.split("|")[1].strip() for r in side} >= {"Spanish (es)", "Chinese (zh)", "Swahili (sw)", "Hindi (hi)"}


# --- The book's commands: every one runs as written from the project's folder, and every exercise's
# papermill command runs on the CI run.

_COMMAND = re.compile(r"^(?:\.venv/bin/|make\b|papermill\b|python3?\b|pytest\b|jupyter-book\b|jupyter\b|pip\b)")
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
# Values that take a command beyond what the CI run offers (a CPU, no network): a download, a GPU, a
# model from the hub, a server. Exercises that set one are listed, not run.
_MODEL_KEYS = {"models", "translator", "translators", "paraphraser", "chat_models", "template_translator",
               "template_paraphraser", "embedder"}


def _book_markdown() -> list[tuple[str, str]]:
    """(where, text) of every markdown cell of the notebooks and of every page in book/."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                found.append((f"{path.name} (cell {cell.get('id')})", "".join(cell["source"])))
    found += [(f"book/{p.name}", p.read_text(encoding="utf-8")) for p in sorted((ROOT / "book").glob("*.md"))]
    return found


def _commands(markdown: str) -> list[str]:
    """The command-like code spans and fenced-block lines of a Markdown text, whitespace collapsed, in order."""
    found: list[str] = []

    def fenced(match: re.Match) -> str:
        for line in match.group(2).splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if _COMMAND.match(line):
                found.append(line)
        return ""

    for paragraph in re.split(r"\n[ \t]*\n", _FENCE.sub(fenced, markdown)):
        for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", paragraph):
            span = " ".join(span.split())
            if _COMMAND.match(span):
                found.append(span)
    return found


# `:nonumber:` and the number as the title: "Exercise (2)" counts within its chapter, not across the book.
_EXERCISE = re.compile(r"^:::\{exercise\} (\d+)\n:label: ex-(\d\d)-\1\n:nonumber:\n\n(.*?)^:::$", re.M | re.S)
_SOLUTION = re.compile(r"^:::\{solution\} ex-(\d\d)-(\d+)\n(:class: dropdown\n)?\n(.*?)^:::$", re.M | re.S)


def _notebook_markdown() -> list[tuple[str, str]]:
    """(notebook, text) of every markdown cell of the notebooks, in order."""
    return [(path.stem, "".join(cell["source"])) for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
            for cell in json.loads(path.read_text(encoding="utf-8"))["cells"] if cell["cell_type"] == "markdown"]


def _exercise_items() -> list[tuple[str, str, str]]:
    """(notebook, exercise number, text) for every exercise of every notebook's Exercises, in order."""
    return [(notebook, number, item) for notebook, text in _notebook_markdown()
            for number, chapter, item in _EXERCISE.findall(text) if notebook.startswith(chapter)]


def _solutions() -> dict[tuple[str, str], tuple[bool, str]]:
    """(notebook, exercise number) -> (hidden until opened, text) of every solution."""
    found = {}
    for notebook, text in _notebook_markdown():
        for chapter, number, dropdown, item in _SOLUTION.findall(text):
            assert notebook.startswith(chapter), f"{notebook}: a solution labelled for chapter {chapter}"
            found[(notebook, number)] = (bool(dropdown), item)
    return found


def _quoted(solution: str) -> dict[str, list[str]]:
    """Exercise number -> the report values a solution quotes from that exercise's run ({glue:text}`ex2_name`)."""
    found: dict[str, list[str]] = {}
    for number, name in re.findall(r"\{glue:?\w*\}`ex(\d+)_(\w+)(?::[^`]*)?`", solution):
        found.setdefault(number, []).append(name)
    return found


def _glued(path: Path) -> dict[str, str]:
    """The values an executed notebook glued, as text (their `text/plain` form)."""
    cells = nbformat.read(path, as_version=4).cells
    return {o["metadata"]["scrapbook"]["name"]: o["data"].get("application/papermill.record/text/plain")
            for c in cells if c.cell_type == "code" for o in c.get("outputs", []) if "scrapbook" in o.get("metadata", {})}


def _same_value(a: str | None, b: str | None) -> bool:
    """Two glued values alike: numbers to float precision (a rerun's sums may differ in the last bits),
    anything else as written."""
    try:
        x, y = ast.literal_eval(a), ast.literal_eval(b)
    except (ValueError, SyntaxError):
        return a == b
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)
    return x == y


def _exercises() -> list[tuple[str, str, list[str]]]:
    """(notebook, exercise number, commands) for every numbered exercise."""
    return [(notebook, number, _commands(item)) for notebook, number, item in _exercise_items()]


EXERCISE_LABEL = re.compile(r"^\*\*(Seconds|Minutes|Hours); ([^*]+)\.\*\* ")
OFFLINE = "offline"
RELEASED_NEED = "the released scores"


def test_every_exercise_says_its_cost_and_what_it_needs():
    """Each exercise opens with its cost and needs ("**Seconds; offline.**"); one labelled offline runs on the
    CI run (no download, GPU, hub or server in its commands), one on the released run says it needs the
    released scores, and one that cannot run offline says what to do instead."""
    wrong = []
    items = _exercise_items()
    assert len(items) == len(_exercises()) >= 48
    for notebook, number, text in items:
        where = f"{notebook} exercise {number}"
        label = EXERCISE_LABEL.match(text)
        if not label:
            wrong.append(f"{where}: no cost and needs label")
            continue
        needs = label.group(2)
        for command in _commands(text):
            if command.startswith(".venv/bin/papermill "):
                _, _, values = _papermill_command(command)
                reason = _needs_more_than_the_ci_run(values)
                if reason and needs == OFFLINE:
                    wrong.append(f"{where}: labelled offline, but {reason}")
                if values.get("run_name") == "released" and needs != RELEASED_NEED:
                    wrong.append(f"{where}: runs on the released scores, labelled {needs!r}")
        if needs not in (OFFLINE, RELEASED_NEED) and not re.search(r"\bWithout\b|a run without them", text):
            wrong.append(f"{where}: needs {needs!r} and does not say what to do without it")
        if needs == RELEASED_NEED and "make released" not in text:
            wrong.append(f"{where}: needs the released scores and does not say how to get them")
    assert not wrong, "\n".join(wrong)


NO_NUMBER = re.compile(r"no\s+number\s+is\s+(given|shown)|gives\s+no\s+number", re.I)
TEACHES = re.compile(r"\*What\s+it\s+teaches:\*")


def test_every_exercise_has_a_solution_hidden_until_opened():
    """Each exercise has one solution, folded until opened, that says what it teaches; it quotes the
    numbers of this exercise's own run (`ex<number>_...` values, which the CI run holds against the
    command's output) or, where the exercise reruns a chapter, says why it gives no number here; a
    chapter rerun labelled offline, whatever it costs, must quote numbers."""
    solutions = _solutions()
    items = _exercise_items()
    wrong = [f"{notebook} solution {number}: no such exercise" for notebook, number in
             set(solutions) - {(n, k) for n, k, _ in items}]
    for notebook, number, text in items:
        where = f"{notebook} exercise {number}"
        if (notebook, number) not in solutions:
            wrong.append(f"{where}: no solution")
            continue
        dropdown, solution = solutions[(notebook, number)]
        quoted = _quoted(solution)
        if not dropdown:
            wrong.append(f"{where}: the solution shows before the reader opens it (:class: dropdown)")
        if not TEACHES.search(solution):
            wrong.append(f"{where}: the solution does not say what the exercise teaches")
        if set(quoted) - {number}:
            wrong.append(f"{where}: the solution quotes another exercise's values ({sorted(set(quoted) - {number})})")
        runs_a_chapter = any(c.startswith(".venv/bin/papermill ") for c in _commands(text))
        if runs_a_chapter and not quoted and not NO_NUMBER.search(solution):
            wrong.append(f"{where}: the solution neither quotes its run's numbers nor says why it gives none")
        if quoted and NO_NUMBER.search(solution):
            wrong.append(f"{where}: the solution quotes numbers and says it gives none")
        label = EXERCISE_LABEL.match(text)
        if label and label.group(2) == OFFLINE and runs_a_chapter and not quoted:
            wrong.append(f"{where}: an offline chapter rerun whose solution quotes no number of its run")
    assert not wrong, "\n".join(wrong)


def _papermill_value(value: str):
    """A `-p` value as papermill's command line reads it."""
    if value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[value]
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _papermill_command(command: str) -> tuple[Path, list[str], dict]:
    """The notebook, the options after the output path, and the parameter values (as papermill merges
    them: files, then YAML, then -p) of a `.venv/bin/papermill NOTEBOOK OUTPUT ...` command."""
    args = shlex.split(command)
    assert args[0] == ".venv/bin/papermill" and len(args) >= 3 and args[1].startswith("notebooks/"), command
    notebook, options = ROOT / args[1], args[3:]
    assert notebook.exists() and not args[2].startswith("-"), f"{command}: no notebook {args[1]}, or no output path"
    files, texts, pairs, rest = [], [], [], list(options)
    while rest:
        option = rest.pop(0)
        if option in ("-p", "--parameters", "-r", "--parameters_raw"):
            name, value = rest.pop(0), rest.pop(0)
            pairs.append((name, value if option in ("-r", "--parameters_raw") else _papermill_value(value)))
        elif option in ("-f", "--parameters_file"):
            files.append(yaml.safe_load((ROOT / rest.pop(0)).read_text(encoding="utf-8")) or {})
        elif option in ("-y", "--parameters_yaml"):
            texts.append(yaml.safe_load(rest.pop(0)) or {})
        else:
            raise AssertionError(f"{command}: an option this test does not know: {option}")
    values: dict = {}
    for part in [*files, *texts, dict(pairs)]:
        values.update(part)
    return notebook, options, values


def _needs_more_than_the_ci_run(values: dict) -> str:
    """Why a command cannot run on the CI run (offline, on a CPU), or ''."""
    reasons = []
    for key, value in values.items():
        for v in value if isinstance(value, list) else [value]:
            if not isinstance(v, str):
                continue
            if v == "download" or (key == "template_library" and v == "langbite"):
                reasons.append(f"{key}: {v} downloads files")
            elif key == "device" and v.startswith("cuda"):
                reasons.append(f"{key}: {v} needs a GPU")
            elif key == "endpoint" and v:
                reasons.append(f"{key}: a server")
            elif key in _MODEL_KEYS and re.fullmatch(r"[\w.-]+/[\w.-]+", v) and not (ROOT / v).exists():
                reasons.append(f"{key}: {v} comes from the model hub")
    return "; ".join(reasons)


def test_every_command_in_the_book_runs_from_the_project_folder():
    """Every command the book shows runs as written from the project's folder: `make ...` or a program of
    the project's environment by its path (`.venv/bin/...`); a papermill command names an existing
    notebook and sets only parameters that notebook declares (papermill only warns about others, and the
    chapter would silently ignore them), with values of the right type; a make command names a target of
    the Makefile and an existing params file; and every chapter has exercises, each with a command."""
    from biasaudit.book.run_book import notebook_parameters
    from biasaudit.run.params import RunParams, validate_params

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    commands = [(where, command) for where, text in _book_markdown() for command in _commands(text)]
    assert len(commands) > 40, "the book's commands are found"
    wrong = []
    for where, command in commands:
        if not command.startswith((".venv/bin/", "make")):
            wrong.append(f"{where}: does not run as written from the project's folder (use .venv/bin/...): {command}")
        elif command.startswith(".venv/bin/"):
            program = command.split()[0]
            if not (ROOT / program).exists() and (ROOT / ".venv" / "bin" / "python").exists():
                wrong.append(f"{where}: {program} is not in the environment")
            if program.endswith("/papermill") and command != program:  # not a mere mention of the program
                notebook, _, values = _papermill_command(command)
                undeclared = set(values) - set(notebook_parameters(notebook))
                if undeclared:
                    wrong.append(f"{where}: {sorted(undeclared)} not parameters of {notebook.name}: {command}")
                try:
                    validate_params({k: v for k, v in values.items() if k in RunParams.model_fields}, command)
                except ValueError as err:
                    wrong.append(f"{where}: {err}")
        else:
            words = command.split()
            if len(words) > 1 and words[1] not in targets and "=" not in words[1]:
                wrong.append(f"{where}: no Makefile target {words[1]!r}: {command}")
            for assignment in (w for w in words if w.startswith("PARAMS=")):
                path = assignment.split("=", 1)[1]
                if "<" not in path and not (ROOT / path).is_file():
                    wrong.append(f"{where}: no params file {path}: {command}")
    exercises = _exercises()
    chapters = {path.stem for path in (ROOT / "notebooks").glob("*.ipynb")}
    wrong += [f"{name}: no ### Exercises" for name in sorted(chapters - {n for n, _, _ in exercises})]
    wrong += [f"{notebook} exercise {number}: no command" for notebook, number, found in exercises if not found]
    assert not wrong, "\n".join(wrong)


# A command still running after this long is hung, not slow; times over two minutes are only reported.
HUNG_AFTER = 1800


def test_exercise_commands_run_on_the_ci_run(ci_book, tmp_path, monkeypatch):
    """Every exercise's `.venv/bin/...` command runs as written from the project's folder on the CI run
    (its parameters from params/ci.yml under the command's own, which win), and its executed notebook
    holds no error; every value its solution quotes (`ex<n>_name`, glued by the CI book's chapter) equals
    the value the command's run glues as `name`; its time is reported (a busy machine is slower, so no
    time limit fails it). A command on `-p run_name released` runs on a `released` run
    imported from the test fixtures instead, exactly as written. `make` commands (whole books, downloads)
    and commands that need a download, a GPU or the model hub are listed, not run."""
    from biasaudit.book.run_book import notebook_parameters
    from biasaudit.data.release_import import import_released

    book, _ = ci_book
    runs = book / "runs"
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(runs))
    ci_values = yaml.safe_load((ROOT / "params" / "ci.yml").read_text(encoding="utf-8"))
    env = {**os.environ, "BIASAUDIT_RUNS_DIR": str(runs), **network_guard(tmp_path / "guard")}
    ran, listed, not_as_written, failed = [], [], [], []
    # Commands that score, translate, ask models or read the released run take the run's lock or write its
    # caches: those on one run go one at a time, in the book's order (a lane per run; a lane per command that
    # is not a chapter's). Chapters that only read the CI run's stored results run two at a time, as in `make
    # book`, once every lane is done.
    lanes: dict[str, list[tuple[str, str, list[str], Path | None]]] = {}
    side_by_side: list[tuple[str, str, list[str], Path | None]] = []
    released = False
    outputs: dict[tuple[str, str], list[Path]] = {}  # the exercise's chapter runs, whose values its solution quotes
    for notebook, number, commands in _exercises():
        for command in commands:
            where = f"{notebook} exercise {number}"
            if command.startswith("make"):
                listed.append(f"{where}: {command} (a make command)")
                continue
            if not command.startswith(".venv/bin/"):
                not_as_written.append(f"{where}: {command}")
                continue
            out = None
            if command.startswith(".venv/bin/papermill "):
                path, options, values = _papermill_command(command)
                declared = notebook_parameters(path)
                undeclared = set(values) - set(declared)
                if undeclared:
                    failed.append(f"{where}: {sorted(undeclared)} are not parameters of {path.name}: {command}")
                    continue
                reason = _needs_more_than_the_ci_run(values)
                if reason:
                    listed.append(f"{where}: {command} ({reason})")
                    continue
                out = tmp_path / f"{sum(map(len, lanes.values())) + len(side_by_side):02d}_{path.name}"
                extra = []
                if values.get("run_name") == "released":  # the fixtures' released scores (replacing any there)
                    if not released:
                        import_released("released", ROOT / "tests" / "fixtures" / "released")
                        released = True
                else:  # the CI run's values, under the command's own (papermill: -p and -y win over -f)
                    ci_file = tmp_path / f"ci_{path.stem}.yml"
                    ci_file.write_text(yaml.safe_dump({k: v for k, v in ci_values.items() if k in declared}),
                                       encoding="utf-8")
                    extra = ["-f", str(ci_file)]
                argv = [".venv/bin/papermill", str(path.relative_to(ROOT)), str(out), *extra, *options]
                outputs.setdefault((notebook, number), []).append(out)
                lane = values.get("run_name", ci_values["run_name"])
                alone = path.stem in ONE_AT_A_TIME or lane == "released"
            else:
                argv, lane, alone = shlex.split(command), command, True
            job = (where, command, argv, out)
            lanes.setdefault(lane, []).append(job) if alone else side_by_side.append(job)

    def execute(job: tuple[str, str, list[str], Path | None]) -> None:
        where, command, argv, out = job
        started = time.time()
        try:  # the limit only catches a hung command: a busy machine makes any command slower
            result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HUNG_AFTER)
        except subprocess.TimeoutExpired:
            failed.append(f"{where}: still running after {HUNG_AFTER} s (hung?): {command}")
            return
        seconds = time.time() - started
        ran.append(f"{where}: {seconds:.0f} s{' (slow)' if seconds > 120 else ''}: {command}")
        if result.returncode != 0:
            failed.append(f"{where}: exit {result.returncode}: {command}\n{(result.stdout + result.stderr)[-2000:]}")
        elif out is not None and _errors(out):
            failed.append(f"{where}: the notebook holds errors {_errors(out)}: {command}")

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda lane: [execute(job) for job in lane], sorted(lanes.values(), key=len, reverse=True)))
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(execute, side_by_side))
    print("ran:\n  " + "\n  ".join(ran))
    # Each solution's quoted values against what the command's run glued under the same names.
    solutions, checked = _solutions(), []
    for (notebook, number), runs in outputs.items():
        quoted = _quoted(solutions[(notebook, number)][1]).get(number, [])
        if not quoted or not all(out.exists() for out in runs):
            continue
        stated, got = _glued(book / "book" / "analyses" / f"{notebook}.ipynb"), {}
        for out in runs:  # a value glued by the exercise's later chapter run wins
            got.update(_glued(out))
        for name in quoted:
            key = f"ex{number}_{name}"
            checked.append(f"{notebook} exercise {number}: {name}")
            if key not in stated or not _same_value(stated[key], got.get(name)):
                failed.append(f"{notebook} exercise {number}: the solution says {name} = {stated.get(key)}, "
                              f"the command's run gives {got.get(name)}")
    print(f"solution values checked against their commands' runs: {len(checked)}")
    print("listed, not run:\n  " + "\n  ".join(dict.fromkeys(listed)))
    attempts = tmp_path / "guard" / "attempts.log"
    assert not attempts.exists() or not attempts.read_text().strip(), f"an exercise reached for the network: " \
        f"{attempts.read_text()[:500]}"
    assert not failed, "\n".join(failed)
    assert not not_as_written, "exercise commands that do not run as written from the project's folder:\n" + \
        "\n".join(not_as_written)
    assert ran, "the exercises' commands were found"
    assert len(checked) >= 40, f"the solutions' values were checked ({len(checked)})"


@pytest.mark.parametrize("notebook, chapter, step", [
    ("01_translate", "translate", "translate"), ("02_score", "score", "score"),
    ("20_label_errors", "label_errors", "label_errors"), ("30_template_tests", "template_tests", "template_tests"),
    ("31_template_translation", "template_translation", "template_translation")])
def test_the_computing_chapters_only_read_their_steps_tables(ci_book, notebook, chapter, step):
    """Where a chapter needs a model, its notebook runs a step first; the report, run again on the
    step's tables in a fresh process, loads no model (nor torch, but for chapter 20's tokenizer) and
    quotes the same sentences as the notebook."""
    book, _ = ci_book
    runs = book / "runs_as_built"  # as the book's build left them
    record = runs / "ci" / "steps" / step / "step.json"
    code = ("import json, sys\nimport biasaudit.lm.registry as registry\n"
            "def refuse(*args, **kwargs):\n    raise RuntimeError('the report loaded a model')\n"
            "registry.load_model = refuse\nfrom biasaudit.run.params import RunParams\n"
            f"from biasaudit.book.chapters import {chapter} as chapter\n"
            "report = chapter.report(RunParams(**json.load(open(sys.argv[1]))['params']))\n"
            "print(json.dumps({'torch': 'torch' in sys.modules,\n"
            "                  'values': {k: v for k, v in report.values.items() if isinstance(v, str)}}))")
    result = subprocess.run([sys.executable, "-c", code, str(record)], capture_output=True, text=True,
                            env={**os.environ, "BIASAUDIT_RUNS_DIR": str(runs)}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    # Chapter 20 shows the scorer error's token boundaries with the tokenizer (transformers imports torch);
    # the others need no model library at all.
    assert not found["torch"] or chapter == "label_errors"
    glued = _glued(book / "book" / "analyses" / f"{notebook}.ipynb")
    texts = {k: v for k, v in found["values"].items() if glued.get(k) is not None}
    assert texts and [k for k, v in texts.items() if glued[k] not in (v, repr(v))] == []


# The chapters that only read stored results: a rerun must give every output again, glued values, tables
# and charts alike. (A step chapter's rerun reads back what its first run made, and says so: chapter 02's
# "scored now" and its seconds differ by design, so those are run again by the exercises' test instead.)
STEP_CHAPTERS = {"00_items", "01_translate", "02_score", "20_label_errors", "30_template_tests",
                 "31_template_translation", "40_reliability"}


def test_every_results_chapter_gives_the_same_outputs_on_a_rerun(ci_book, tmp_path):
    """nbval re-executes each executed results chapter of the CI run (its injected parameters included)
    in a fresh kernel on the runs folder as the build left it, and compares every output with the
    stored one: the glued values the prose quotes (the solutions' too), the tables' HTML and the charts' SVG."""
    book, _ = ci_book
    runs = tmp_path / "runs"
    shutil.copytree(book / "runs_as_built", runs)
    chapters = [p for p in sorted((book / "book" / "analyses").glob("*.ipynb")) if p.stem not in STEP_CHAPTERS]
    assert len(chapters) >= 12, [p.name for p in chapters]
    copies = []
    for path in chapters:
        shutil.copy(path, tmp_path / path.name)
        copies.append(str(tmp_path / path.name))
    env = {**os.environ, "BIASAUDIT_RUNS_DIR": str(runs), **network_guard(tmp_path / "guard")}
    # Two nbval processes side by side (half the chapters each), as `make book` runs two chapters at a time;
    # the sanitisers blank what a rerun may change without changing a result (tests/nbval_sanitize.cfg).
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
               "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg")]
    halves = [subprocess.Popen([*command, *copies[i::2]], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for i in (0, 1)]
    outputs = [half.communicate(timeout=HUNG_AFTER)[0] for half in halves]
    for half, output in zip(halves, outputs):
        assert half.returncode == 0, output[-6000:]
    cells = sum(int(n) for output in outputs for n in re.findall(r"\b(\d+) passed\b", output))
    assert cells >= 100, outputs  # every code cell of the results chapters was compared


def test_one_number_one_value_across_the_pages(ci_book, monkeypatch):
    """A language's drop and its 95% interval are one computation shown by chapters 10, 16 and 22: every page
    that shows them shows the same numbers (a page with another quantity, a subset, names it otherwise)."""
    from biasaudit.book.chapters import faithful, language_drops, verdict
    from biasaudit.run.params import read_params

    book, _ = ci_book
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(book / "runs_as_built"))
    params = read_params(ROOT / "params" / "ci.yml")
    drops = language_drops.report(params).tables["drops"].set_index("language")
    shown = {"chapter 10": drops[["drop", "drop_low", "drop_high"]],
             "chapter 16": faithful.report(params).tables["faithful"].set_index("language")[
                 ["drop_all", "drop_all_low", "drop_all_high"]],
             "chapter 22": verdict.report(params).tables["languages"].set_index("language")[["drop", "low", "high"]]}
    languages = [lang for lang in drops.index if lang != "en"]
    assert languages
    for page, table in shown.items():
        values = table.loc[languages].to_numpy(dtype=float)
        assert values == pytest.approx(drops.loc[languages, ["drop", "drop_low", "drop_high"]].to_numpy(dtype=float)), page
