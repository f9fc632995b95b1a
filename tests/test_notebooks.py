"""Every chapter runs end to end on the quick CI run (params/ci.yml: 14 base items, a tiny random
model made on the spot), in a temporary runs folder, and the book renders with every warning an
error. Independent of test order and of any earlier `make book`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from biasaudit.check_html import remote_assets
from biasaudit.run_book import analysis_notebooks, run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ci_book(tmp_path_factory):
    """The CI run's executed notebooks in a book folder of their own, and the time of each chapter."""
    book = tmp_path_factory.mktemp("book")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIASAUDIT_RUNS_DIR", str(book / "runs"))
        timings = run(ROOT / "params" / "ci.yml", out_dir=book / "book" / "analyses")
    print("time per chapter:", ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings))
    return book, dict(timings)


def test_every_chapter_runs_and_glues_what_its_prose_quotes(ci_book):
    book, timings = ci_book
    assert sorted(timings) == sorted(analysis_notebooks())
    for name in timings:
        notebook = nbformat.read(book / "book" / "analyses" / f"{name}.ipynb", as_version=4)
        outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], name
        glued = {o["metadata"]["scrapbook"]["name"] for o in outputs if "scrapbook" in o.get("metadata", {})}
        quoted = {ref.split(":")[0] for c in notebook.cells if c.cell_type == "markdown"
                  for ref in _glue_references(c.source)}
        assert quoted <= glued, f"{name}: the prose quotes {sorted(quoted - glued)}, which the chapter never glues"


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
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", str(book), "-W", "-n", "--keep-going"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = book / "_build" / "html"
    assert not remote_assets(html)
    page = (html / "book" / "analyses" / "10_language_drops.html").read_text()
    assert ".svg\"" in page, "charts are SVG images built offline"
    assert "report = chapter.report" not in page, "glue and import cells are hidden"
