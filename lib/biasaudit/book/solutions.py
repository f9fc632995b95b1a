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

import sys
from collections.abc import Callable, Mapping
from typing import Any

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


def _does_not_apply(exercise: int, params: RunParams, err: Exception) -> None:
    print(f"exercise {exercise} does not apply to run {params.run_name!r}, so its solution has no values here: {err}",
          file=sys.stderr)


def glue_solutions(report_of: Callable[[RunParams], Report], params: RunParams,
                   changes: Mapping[int, Mapping[str, Any]],
                   predicted: Mapping[int, Predicted] | None = None) -> None:
    """Glue `solution_values` for the notebook's solutions ({glue:text}`ex1_n_reliable`), not displayed."""
    Report(values=solution_values(report_of, params, changes, predicted)).glue()
