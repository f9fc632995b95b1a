"""The exercises' solutions: the numbers a solution quotes come from the chapter's own code, run with
the exercise's parameters, never from a paste.

A chapter's solutions cell calls `glue_solutions` with the exercise's parameter changes: the chapter's
report is made again with them, exactly as the exercise's papermill command makes it, and every value
it quotes is glued as `ex<number>_<name>` for the solution's prose. Where an exercise reruns a step
(scoring, asking a model) and the book cannot afford it, the chapter states what the rerun must give
instead (`predicted`: a batch size that does not move a score, a rerun that scores nothing): a
prediction the exercises' test holds against the command's actual output on the CI run, as it holds
every computed solution.

An exercise whose parameters do not apply to the run a chapter is on (sums asked of the released
scores, which carry per-token means only) gets no values: its solution is on the main run's page, and
the released part's copies of the chapters leave the exercises out
(`biasaudit.book.released_part.mark_as_released`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import nbformat

from biasaudit.book.report import Report
from biasaudit.run.params import RunParams, validate_params


def solution_name(exercise: int, name: str) -> str:
    """The glue name under which exercise `exercise`'s solution quotes the report value `name`."""
    return f"ex{exercise}_{name}"


def with_changes(params: RunParams, changes: Mapping[str, Any], origin: str = "an exercise's parameters") -> RunParams:
    """`params` with an exercise's changes, validated as its papermill command's would be."""
    return validate_params({**params.model_dump(), **changes}, origin)


Predicted = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


def solution_values(report_of: Callable[[RunParams], Report], params: RunParams,
                    changes: Mapping[int, Mapping[str, Any]],
                    predicted: Mapping[int, Predicted] | None = None) -> dict[str, Any]:
    """Each exercise's report values under its own names: the report made again with the exercise's
    parameter changes (validated as a papermill command's would be), then the predicted values (or
    a function that works them out, called here: one that cannot on this run gives none)."""
    values: dict[str, Any] = {}
    for exercise, change in changes.items():
        changed = with_changes(params, change, f"exercise {exercise}'s parameters")
        try:
            made = report_of(changed).values
        except (ValueError, KeyError) as err:  # e.g. sums asked of released scores that carry means only
            _does_not_apply(exercise, params, err)
            continue
        values.update({solution_name(exercise, k): v for k, v in made.items()})
    for exercise, stated in (predicted or {}).items():
        try:
            stated = stated() if callable(stated) else stated
        except (ValueError, KeyError) as err:  # e.g. a rerun on items the released scores do not hold
            _does_not_apply(exercise, params, err)
            continue
        values.update({solution_name(exercise, k): v for k, v in stated.items()})
    return values


NOT_APPLYING = "does not apply to run"


def _does_not_apply(exercise: int, params: RunParams, err: Exception) -> None:
    print(f"exercise {exercise} {NOT_APPLYING} {params.run_name!r}, so its solution has no values here: {err}",
          file=sys.stderr)


SOLUTION = re.compile(r"(:::\{solution\} ex-[\w-]+?-(\d+)\n(?::\w+:[^\n]*\n)*)(.*?)(\n:::)", re.S)
GLUED = re.compile(r"\{glue(?::\w+)?\}`(ex\d+_\w+)")
WHY = re.compile(r"exercise (\d+) " + NOT_APPLYING + r" '([^']*)', so its solution has no values here: ([^\n]*)")


def in_words(reason: str) -> str:
    """Why an exercise's numbers cannot be had on a run, for a reader (the error itself names rows and columns)."""
    if "lp_sum" in reason or "sums" in reason:
        return "the exercise asks for summed log-probs, and this run's scores do not have them for every version"
    if "has not scored" in reason:
        return "the exercise asks about item versions this run has not scored"
    return "the exercise's parameters do not apply to this run's scores"


def settle_unanswered(path: Path) -> list[int]:
    """In an executed chapter, replace each solution whose numbers this run could not work out (an exercise
    about another run's items, or sums asked of scores that have none) by a sentence saying so and why: the page
    never shows a solution with its numbers missing. Returns the exercises so settled."""
    notebook = nbformat.read(path, as_version=4)
    glued, why = set(), {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                glued.add(name)
            if output.get("output_type") == "stream":
                why.update({int(n): (run, reason) for n, run, reason in WHY.findall(output.get("text", ""))})
    settled: list[int] = []

    def settle(match: re.Match) -> str:
        missing = [name for name in GLUED.findall(match.group(3)) if name not in glued]
        if not missing:
            return match.group(0)
        exercise = int(match.group(2))
        settled.append(exercise)
        run, reason = why.get(exercise, ("", ""))
        on = f"run `{run}`" if run else "this run"
        return (f"{match.group(1)}\nThe solution quotes this chapter's numbers under the exercise's parameters, and on "
                f"{on} they cannot be worked out: {in_words(reason)}. Run the exercise's commands to see them; the book "
                f"built with the default parameters (`make book`) gives them on this page.{match.group(4)}")

    for cell in notebook.cells:
        if cell.cell_type == "markdown" and ":::{solution}" in cell.source:
            cell.source = SOLUTION.sub(settle, cell.source)
    if settled:
        nbformat.write(notebook, path)
    return settled


def glue_solutions(report_of: Callable[[RunParams], Report], params: RunParams,
                   changes: Mapping[int, Mapping[str, Any]],
                   predicted: Mapping[int, Predicted] | None = None) -> None:
    """Glue `solution_values` for the notebook's solutions ({glue:text}`ex1_n_reliable`), not displayed."""
    Report(values=solution_values(report_of, params, changes, predicted)).glue()
