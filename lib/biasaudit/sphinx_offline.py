"""Sphinx extension: serve MathJax 3 from the build so the book needs no CDN.

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

COMPONENT = "tex-chtml.js"


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


def setup(app: Sphinx) -> dict:
    app.config.mathjax_path = f"mathjax/{COMPONENT}"
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
