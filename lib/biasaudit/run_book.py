"""Run the book's notebooks with one params file: `python -m biasaudit.run_book --params FILE`.

The params file is validated first (`biasaudit.params.read_params`): a misspelt key, a wrong
type or a missing file stops the run before any notebook starts, naming the file and the key.
Each notebook listed under book/analyses/ in _toc.yml then runs with papermill from notebooks/
into book/analyses/, receiving only the params it declares. When the paper's released scores
are on this machine (or the params' `released_study` names them), the results chapters run a
second time on them into book/released/, the book's released-study part
(`biasaudit.released_study`). The book itself is built with execution off. The time of every
chapter is printed at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
import papermill
import yaml

from biasaudit import released_study
from biasaudit.params import BOOK_KEYS, ParamsError, given_keys, read_params
from biasaudit.paths import PROJECT_ROOT
from biasaudit.released import ReleasedDataError

ANALYSES = "book/analyses/"


def analysis_notebooks(toc_path: Path = PROJECT_ROOT / "_toc.yml") -> list[str]:
    """Notebook names (e.g. '10_language_drops') in the order the table of contents lists them."""
    names: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            file = node.get("file")
            if isinstance(file, str) and file.startswith(ANALYSES) and (PROJECT_ROOT / "notebooks" /
                                                                        f"{file[len(ANALYSES):]}.ipynb").exists():
                names.append(file[len(ANALYSES):])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(toc_path.read_text(encoding="utf-8")))
    return names


def notebook_parameters(notebook: Path) -> dict[str, dict]:
    """The parameters a notebook declares (name → papermill's description: type, default, help)."""
    return dict(papermill.inspect_notebook(str(notebook)))


def hide_injected_parameters(path: Path) -> None:
    """The book shows a run's parameters once (its own page), not in every chapter."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    nbformat.write(notebook, path)


def write_parameters_page(params_path: str | Path, out_dir: Path) -> None:
    """book/analyses/parameters.md: the params file of this build and every value the run used."""
    params = read_params(params_path)
    given = given_keys(params_path)
    rows = "\n".join(f"| `{key}` | `{value!r}` | {'set in the file' if key in given else 'default'} |"
                     for key, value in params.model_dump().items())
    text = (f"# This run's parameters\n\nThe chapters of this build ran with `{Path(params_path).as_posix()}`. Every "
            "parameter below is either set in that file or takes the project's default (the small offline run). "
            "Rerun the book with another file with `make book PARAMS=params/<yours>.yml`, or one chapter with "
            "papermill (see each chapter's Parameters section).\n\n| parameter | value | from |\n|---|---|---|\n"
            f"{rows}\n")
    (out_dir / "parameters.md").write_text(text, encoding="utf-8")


def run_notebooks(values: dict, names: list[str], out_dir: Path, label: str) -> list[tuple[str, float]]:
    """Run these notebooks with papermill into `out_dir`, each receiving the `values` it declares;
    return (chapter, seconds) pairs."""
    declared = {name: notebook_parameters(PROJECT_ROOT / "notebooks" / f"{name}.ipynb") for name in names}
    out_dir.mkdir(parents=True, exist_ok=True)
    timings = []
    for name in names:
        started = time.time()
        print(f"running {name} with {label}", flush=True)
        target = out_dir / f"{name}.ipynb"
        papermill.execute_notebook(
            str(PROJECT_ROOT / "notebooks" / f"{name}.ipynb"), str(target),
            parameters={k: v for k, v in values.items() if k in declared[name]},
            cwd=str(PROJECT_ROOT / "notebooks"), kernel_name="python3", progress_bar=False,
        )
        hide_injected_parameters(target)
        timings.append((name, time.time() - started))
        print(f"  {name} done in {timings[-1][1]:.0f} s", flush=True)
    return timings


def print_timings(timings: list[tuple[str, float]]) -> None:
    total = sum(seconds for _, seconds in timings)
    print("time per chapter: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings)
          + f"; {total:.0f} s in all", flush=True)


def run(params_path: str | Path, only: list[str] | None = None, out_dir: Path | None = None,
        released_dir: Path | None = None) -> list[tuple[str, float]]:
    """Run every chapter (or `only` these) with the params file into `out_dir` (default book/analyses/),
    then, on a whole run, the released-study part into `released_dir` (default book/released/);
    return (chapter, seconds) pairs."""
    params = read_params(params_path)
    given = given_keys(params_path)
    values = {key: getattr(params, key) for key in given - BOOK_KEYS}
    names = analysis_notebooks()
    declared = set().union(*(notebook_parameters(PROJECT_ROOT / "notebooks" / f"{n}.ipynb") for n in names))
    unused = set(values) - declared
    if unused:
        raise ParamsError(f"{params_path}: {sorted(unused)} is not a parameter of any notebook in _toc.yml")
    # Where the released part reads from is settled before any chapter runs, so a bad folder stops at once.
    released_source = None if only else released_study.released_source(params)
    out_dir = Path(out_dir) if out_dir is not None else PROJECT_ROOT / ANALYSES
    out_dir.mkdir(parents=True, exist_ok=True)
    write_parameters_page(params_path, out_dir)
    timings = run_notebooks(values, [n for n in names if not only or n in only], out_dir, str(params_path))
    if not only:
        folder = Path(released_dir) if released_dir is not None else PROJECT_ROOT / released_study.RELEASED
        released_study.clear_part(folder)
        chapters = released_study.part_chapters(names) if released_source is not None else []
        if chapters:
            part = released_study.part_params(released_source)
            ran = run_notebooks(released_study.part_values(part), chapters, folder,
                                f"the released scores in {released_source}")
            timings += [(f"released/{name}", seconds) for name, seconds in ran]
            for name in chapters:
                released_study.mark_as_released(folder / f"{name}.ipynb", name)
        released_study.write_index(folder, params_path, released_source, chapters)
    print_timings(timings)
    return timings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/default.yml", help="YAML file of notebook parameters")
    parser.add_argument("--only", nargs="*", help="run only these notebooks (names without .ipynb)")
    args = parser.parse_args(argv)
    try:
        run(args.params, args.only)
    except (ParamsError, ReleasedDataError) as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main(sys.argv[1:])
