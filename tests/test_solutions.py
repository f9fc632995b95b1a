"""The exercises' solutions: each is the chapter's report made again with the exercise's parameters."""

from __future__ import annotations

import pytest
from biasaudit.book.report import Report
from biasaudit.book.solutions import solution_values, with_changes
from biasaudit.run.params import ParamsError, RunParams


def alpha_report(params: RunParams) -> Report:
    """A report whose values show the parameters it was made with."""
    if params.aggregate == "sum":
        raise ValueError("this scores table has no sums")
    return Report(values={"alpha": params.alpha, "n_permutations": params.n_permutations})


def test_each_exercise_quotes_the_report_made_with_its_parameters_only():
    params = RunParams(alpha=0.05, n_permutations=1000)
    values = solution_values(alpha_report, params, {1: {"alpha": 0.01}, 2: {"n_permutations": 5000}},
                             predicted={3: {"n_scored_now": 0}})
    assert values == {"ex1_alpha": 0.01, "ex1_n_permutations": 1000, "ex2_alpha": 0.05,
                      "ex2_n_permutations": 5000, "ex3_n_scored_now": 0}
    assert params.alpha == 0.05  # the chapter's own parameters are left as they were


def test_an_exercise_with_a_bad_parameter_stops_naming_it():
    with pytest.raises(ParamsError, match="(?s)exercise 1's parameters.*'alpha'"):
        solution_values(alpha_report, RunParams(), {1: {"alpha": 2.0}})
    with pytest.raises(ParamsError, match="not a parameter"):
        with_changes(RunParams(), {"alhpa": 0.01})


def test_an_exercise_that_does_not_apply_to_the_run_gets_no_values(capsys):
    values = solution_values(alpha_report, RunParams(run_name="released"), {1: {"aggregate": "sum"}, 2: {"alpha": 0.01}})
    assert values == {"ex2_alpha": 0.01, "ex2_n_permutations": RunParams().n_permutations}
    assert "exercise 1 does not apply to run 'released'" in capsys.readouterr().err


def test_a_prediction_worked_out_where_the_run_allows_it(capsys):
    def needs_scores():
        raise ValueError("run 'released' has not scored those versions")

    values = solution_values(alpha_report, RunParams(run_name="released"), {},
                             predicted={3: lambda: {"n_tried": 6}, 4: needs_scores, 5: {"n": 1}})
    assert values == {"ex3_n_tried": 6, "ex5_n": 1}
    assert "exercise 4 does not apply to run 'released'" in capsys.readouterr().err
