"""Run the book's notebooks with one params file: `python -m biasaudit.run_book --params FILE`.

Each notebook listed under book/analyses/ in _toc.yml runs with papermill from notebooks/
into book/analyses/, receiving only the params it declares (papermill would only warn about
the others). The book itself is then built with execution off.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import papermill
import yaml

from biasaudit.paths import PROJECT_ROOT, project_path

ANALYSES = "book/analyses/"


def analysis_notebooks(toc_path: Path = PROJECT_ROOT / "_toc.yml") -> list[str]:
    """Notebook names (e.g. '10_language_drops') in the order the table of contents lists them."""
    names: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            file = node.get("file")
            if isinstance(file, str) and file.startswith(ANALYSES):
                names.append(file[len(ANALYSES):])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(toc_path.read_text(encoding="utf-8")))
    return names


def read_params(path: str | Path) -> dict:
    path = project_path(path)
    params = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(params, dict):
        raise ValueError(f"{path}: a params file is a mapping of parameter names to values")
    return params


def notebook_parameters(notebook: Path) -> set[str]:
    return set(papermill.inspect_notebook(str(notebook)).keys())


def run(params_path: str | Path, only: list[str] | None = None) -> None:
    params = read_params(params_path)
    names = analysis_notebooks()
    declared = {name: notebook_parameters(PROJECT_ROOT / "notebooks" / f"{name}.ipynb") for name in names}
    unknown = set(params) - set().union(*declared.values())
    if unknown:
        raise SystemExit(f"{params_path}: {sorted(unknown)} is not a parameter of any notebook in _toc.yml")
    out_dir = PROJECT_ROOT / ANALYSES
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        if only and name not in only:
            continue
        started = time.time()
        print(f"running {name} with {params_path}", flush=True)
        papermill.execute_notebook(
            str(PROJECT_ROOT / "notebooks" / f"{name}.ipynb"),
            str(out_dir / f"{name}.ipynb"),
            parameters={k: v for k, v in params.items() if k in declared[name]},
            cwd=str(PROJECT_ROOT / "notebooks"),
            kernel_name="python3",
            progress_bar=False,
        )
        print(f"  {name} done in {time.time() - started:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/default.yml", help="YAML file of notebook parameters")
    parser.add_argument("--only", nargs="*", help="run only these notebooks (names without .ipynb)")
    args = parser.parse_args(argv)
    run(args.params, args.only)


if __name__ == "__main__":
    main(sys.argv[1:])
