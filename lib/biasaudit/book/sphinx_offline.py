"""Sphinx extension: the book renders the same with no network and on any machine.

MathJax is served from the build, not a CDN, and the book ships its own web fonts for every
script it shows (`biasaudit.book.fonts`), subsetted to the characters of this build's pages.

Explorable charts (`biasaudit.book.explore`) are made live by one script, `_static/explore.js`,
written once per build from vl-convert's bundled Vega libraries and included only in pages that
hold such a chart.

MathJax 3.2 comes from the PyPI package django-static-mathjax (its top-level package
`mathjax` carries the MathJax distribution; nothing from Django is used). The combined
TeX-to-CHTML component and its fonts are copied to _static/mathjax/ after the HTML is
written, and `mathjax_path` points there.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

from biasaudit.book import explore, fonts

LOGGER = logging.getLogger(__name__)

COMPONENT = "tex-chtml.js"
EXPLORE_JS = "explore.js"


def mathjax_distribution() -> Path:
    """The es5/ folder of the packaged MathJax distribution."""
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("MathJax for the offline book comes from `pip install django-static-mathjax`")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5"


def _copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source, target = mathjax_distribution(), Path(app.outdir) / "_static" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / COMPONENT, target / COMPONENT)
    shutil.copytree(source / "output" / "chtml" / "fonts", target / "output" / "chtml" / "fonts", dirs_exist_ok=True)


def _write_fonts(app: Sphinx, exception: Exception | None) -> None:
    """Subset the book's fonts to the characters of the pages just written (see `biasaudit.book.fonts`)."""
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    shutil.rmtree(static / "fonts", ignore_errors=True)
    rows = fonts.write_fonts(fonts.page_characters(Path(app.outdir)), static / "fonts")
    (static / "fonts.css").write_text(fonts.stylesheet(rows), encoding="utf-8")
    charts = fonts.embed_in_charts(Path(app.outdir) / "_images")
    LOGGER.info("fonts: " + ", ".join(f"{r['family']} {r['weight']} ({r['chars']} characters, {r['bytes'] // 1024} KB)"
                                      for r in rows) + f"; the text font embedded in {charts} chart(s)")


def _explore_script(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Pages with an explorable chart load the bundle (called here, the script is added to this page only)."""
    if f'class="{explore.CLASS}"' in context.get("body", ""):
        app.add_js_file(EXPLORE_JS, type="module")


def _single_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Each script once per page: jupyter-book 1 adds sphinx-thebe's configuration script twice, and the
    second declaration of its constant stops with an error in every page's console."""
    scripts, seen = [], set()
    for script in context.get("script_files", []):
        key = (str(getattr(script, "filename", script) or ""),  # a script with a body only: None or ""
               tuple(sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            scripts.append(script)
    context["script_files"] = scripts


def _write_explore_script(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    (Path(app.outdir) / "_static" / EXPLORE_JS).write_text(explore.javascript_bundle(), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.config.mathjax_path = f"mathjax/{COMPONENT}"
    app.add_css_file("fonts.css")
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _write_fonts)
    app.connect("html-page-context", _explore_script)
    app.connect("html-page-context", _single_scripts, priority=900)
    app.connect("build-finished", _write_explore_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
