"""Sphinx extension: serve MathJax from the build so the book needs no CDN.

MathJax 2.7 comes from the PyPI package jupyter-server-mathjax; it is copied to
_static/mathjax/ after the HTML is written, and `mathjax_path` points there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx


def _mathjax_source() -> Path:
    import jupyter_server_mathjax

    return Path(jupyter_server_mathjax.__file__).parent / "static"


def _copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        shutil.copytree(_mathjax_source(), Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def setup(app: Sphinx) -> dict:
    app.config.mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML"
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
