"""Run the book's notebooks with one params file: `python -m biasaudit.book.run_book --params FILE`.

The params file is validated first (`biasaudit.run.params.read_params`): a misspelt key, a wrong
type or a missing file stops the run before any notebook starts, naming the file and the key.
Each notebook listed under book/analyses/ in _toc.yml then runs with papermill from notebooks/
into book/analyses/, receiving only the params it declares. When the paper's released scores
are on this machine (or the params' `released_study` names them), the results chapters run a
second time on them into book/released/, the book's released-study part
(`biasaudit.book.released_part`). The book itself is built with execution off. The time of every
chapter is printed at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import papermill
import yaml

from biasaudit.book import released_part as released_study
from biasaudit.book.solutions import settle_unanswered
from biasaudit.core.paths import PROJECT_ROOT
from biasaudit.data.release_files import ReleasedDataError
from biasaudit.run.params import BOOK_KEYS, ParamsError, given_keys, read_params

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


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a `|` would end the cell, and `<run>` would be read as an HTML tag."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def write_parameters_page(params_path: str | Path, out_dir: Path) -> None:
    """book/analyses/parameters.md: the params file of this build and every value the run used."""
    params = read_params(params_path)
    given = given_keys(params_path)
    fields = type(params).model_fields
    rows = "\n".join(f"| `{key}` | `{value!r}` | {'set in the file' if key in given else 'default'} | "
                     f"{_cell(fields[key].description or '')} |" for key, value in params.model_dump().items())
    text = (f"# This run's parameters\n\nThe chapters of this build ran with `{Path(params_path).as_posix()}`. Every "
            "parameter below is either set in that file or takes the project's default (the small offline run); "
            "what it means is its description in the params schema (`biasaudit.run.params.RunParams`), the one "
            "source the chapters' parameter cells repeat. Rerun the book with another file with "
            "`make book PARAMS=params/<yours>.yml`, or one chapter with papermill (see each chapter's Parameters "
            "section).\n\n| parameter | value | from | what it means |\n|---|---|---|---|\n"
            f"{rows}\n")
    (out_dir / "parameters.md").write_text(text, encoding="utf-8")


# Chapters that load a model (torch then uses every core), or run processes that do (40's quick fault
# sweep), or write what later chapters read (the
# run's items and scores, the similarity table, machine translations) run one at a time, in the
# table of contents' order. The others only read stored scores and format tables: their kernels
# mostly start up and import, so `jobs` of them run side by side.
ONE_AT_A_TIME: frozenset[str] = frozenset({"00_items", "01_translate", "02_score", "20_label_errors",
                                           "30_template_tests", "31_template_translation", "40_reliability"})


def run_notebook(name: str, parameters: dict, out_dir: Path, label: str) -> tuple[str, float]:
    """Run one notebook with papermill into `out_dir`; return (chapter, seconds)."""
    started = time.time()
    print(f"running {name} with {label}", flush=True)
    target = out_dir / f"{name}.ipynb"
    papermill.execute_notebook(
        str(PROJECT_ROOT / "notebooks" / f"{name}.ipynb"), str(target), parameters=parameters,
        cwd=str(PROJECT_ROOT / "notebooks"), kernel_name="python3", progress_bar=False,
    )
    hide_injected_parameters(target)
    settle_unanswered(target)
    seconds = time.time() - started
    print(f"  {name} done in {seconds:.0f} s", flush=True)
    return name, seconds


def run_notebooks(values: dict, names: list[str], out_dir: Path, label: str, jobs: int = 1) -> list[tuple[str, float]]:
    """Run these notebooks with papermill into `out_dir`, each receiving the `values` it declares;
    return (chapter, seconds) pairs in the order of `names`.

    Those outside ONE_AT_A_TIME run `jobs` at a time, after the one-at-a-time chapters that come
    before them (their inputs) and before those that come after; a failing chapter stops the run
    with papermill's error, as a sequential run would."""
    declared = {name: notebook_parameters(PROJECT_ROOT / "notebooks" / f"{name}.ipynb") for name in names}
    out_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    batch: list[str] = []

    def flush() -> None:
        if len(batch) > 1 and jobs > 1:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(run_notebook, name, parameters_of(name), out_dir, label) for name in batch]
                timings.update(future.result() for future in futures)
        else:
            timings.update(run_notebook(name, parameters_of(name), out_dir, label) for name in batch)
        batch.clear()

    def parameters_of(name: str) -> dict:
        return {k: v for k, v in values.items() if k in declared[name]}

    for name in names:
        if name in ONE_AT_A_TIME:
            flush()
            timings.update([run_notebook(name, parameters_of(name), out_dir, label)])
        else:
            batch.append(name)
    flush()
    return [(name, timings[name]) for name in names]


def print_timings(timings: list[tuple[str, float]], wall: float) -> None:
    """Each chapter's own time (chapters that ran side by side overlap), and the wall-clock time."""
    print("time per chapter: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings)
          + f"; {wall:.0f} s wall-clock in all", flush=True)


def run(params_path: str | Path, only: list[str] | None = None, out_dir: Path | None = None,
        released_dir: Path | None = None, jobs: int = 1) -> list[tuple[str, float]]:
    """Run every chapter (or `only` these) with the params file into `out_dir` (default book/analyses/),
    then, on a whole run, the released-study part into `released_dir` (default book/released/);
    return (chapter, seconds) pairs. `jobs` chapters that only read stored results run side by side
    (`run_notebooks`)."""
    started = time.time()
    params = read_params(params_path)
    given = given_keys(params_path)
    values = {key: getattr(params, key) for key in given - BOOK_KEYS}
    names = analysis_notebooks()
    declared = set().union(*(notebook_parameters(PROJECT_ROOT / "notebooks" / f"{n}.ipynb") for n in names))
    unused = set(values) - declared
    if unused:
        raise ParamsError(f"{params_path}: {sorted(unused)} is not a parameter of any notebook in _toc.yml")
    # Where the released part reads from is settled before any chapter runs, so a bad folder stops at once.
    released = None if only else released_study.released_source(params)
    if released is not None:
        print(f"released study: {released.how}", flush=True)
    out_dir = Path(out_dir) if out_dir is not None else PROJECT_ROOT / ANALYSES
    out_dir.mkdir(parents=True, exist_ok=True)
    write_parameters_page(params_path, out_dir)
    timings = run_notebooks(values, [n for n in names if not only or n in only], out_dir, str(params_path), jobs)
    if not only:
        folder = Path(released_dir) if released_dir is not None else PROJECT_ROOT / released_study.RELEASED
        released_study.clear_part(folder)
        chapters = released_study.part_chapters(names) if released.folder is not None else []
        if chapters:
            part = released_study.part_params(released.folder, released.params_file)
            ran = run_notebooks(released_study.part_values(part, released.params_file), chapters, folder,
                                f"the released scores in {released.folder}", jobs)
            timings += [(f"released/{name}", seconds) for name, seconds in ran]
            for name in chapters:
                released_study.mark_as_released(folder / f"{name}.ipynb", name)
        released_study.write_index(folder, params_path, released, chapters)
        (out_dir / "start.md").write_text(released_study.start_text(bool(chapters)), encoding="utf-8")
    print_timings(timings, time.time() - started)
    return timings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/default.yml", help="YAML file of notebook parameters")
    parser.add_argument("--only", nargs="*", help="run only these notebooks (names without .ipynb)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="chapters that only read stored results run this many at a time (default 2)")
    args = parser.parse_args(argv)
    try:
        run(args.params, args.only, jobs=max(1, args.jobs))
    except (ParamsError, ReleasedDataError) as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main(sys.argv[1:])
