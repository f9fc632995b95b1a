"""The exercises' solutions: each is the chapter's report made again with the exercise's parameters."""

from __future__ import annotations

import nbformat
import pytest
from biasaudit.book.report import Report
from biasaudit.book.solutions import settle_unanswered, solution_values, with_changes
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


def test_a_solution_whose_numbers_this_run_cannot_give_says_so_and_why(tmp_path, capsys):
    """An executed chapter: exercise 1's values were glued, exercise 2's could not be worked out on this run."""
    solution_values(alpha_report, RunParams(run_name="released"), {2: {"aggregate": "sum"}})
    message = capsys.readouterr().err
    glued = nbformat.v4.new_code_cell("glue", outputs=[
        nbformat.v4.new_output("display_data", data={"text/plain": "0.01"},
                               metadata={"scrapbook": {"name": "ex1_alpha"}}),
        nbformat.v4.new_output("stream", name="stderr", text=message)])
    text = ("## Summary\n\n:::{solution} ex-10-1\n:class: dropdown\n\nAt {glue:text}`ex1_alpha` ...\n:::\n\n"
            ":::{solution} ex-10-2\n:class: dropdown\n\nSums give {glue:text}`ex2_alpha` and "
            "{glue:text}`ex2_n_permutations`.\n:::\n")
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[glued, nbformat.v4.new_markdown_cell(text)]), path)
    assert settle_unanswered(path) == [2]
    after = nbformat.read(path, as_version=4).cells[1].source
    assert "At {glue:text}`ex1_alpha` ..." in after, "a solution whose numbers are there is left as it is"
    assert "ex2_" not in after and ":::{solution} ex-10-2\n:class: dropdown\n\nThe solution quotes" in after
    assert "on run `released` they cannot be worked out: the exercise asks for summed log-probs" in after
    assert after.endswith(":::\n"), "the block still closes"
    assert settle_unanswered(path) == [], "nothing left to settle"
