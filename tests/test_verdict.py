"""The verdict rule (chapter 22), branch by branch, the power of the test at a cell's own scatter
against the normal approximation, and the verdicts of a synthetic study whose truth is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.analyses import verdict as v
from biasaudit.run.options import StudyOptions
from conftest import score_row
from scipy.stats import norm


@pytest.mark.parametrize("drop, reliable, floor, power, expected", [
    (0.005, True, 0.01, 1.0, v.NOISE),  # reliable, but no larger than rewording moves the scores
    (-0.008, False, 0.01, 0.1, v.NOISE),
    (0.05, True, 0.01, 0.2, v.REAL),
    (-0.05, True, 0.01, 0.2, v.REAL),  # a reliable rise is a real shift too
    (0.05, False, 0.01, 0.3, v.UNDERPOWERED),
    (0.05, False, 0.01, 0.95, v.NOISE),
    (0.05, False, np.nan, np.nan, v.UNDERPOWERED),  # no floor and no power known
])
def test_cell_verdict(drop, reliable, floor, power, expected):
    assert v.cell_verdict(drop=drop, reliable=reliable, floor=floor, power=power) == expected


# The released numbers (ten models, floor 0.008): Korean has 5 real shifts and 5 cells with too
# little power; Arabic and Spanish are decided by the pooled drop's interval.
FIVE_AND_FIVE = [v.REAL] * 5 + [v.UNDERPOWERED] * 5


@pytest.mark.parametrize("cells, low, high, floor, expected", [
    ([v.REAL, v.REAL], np.nan, np.nan, np.nan, (v.REAL, "cells")),
    (FIVE_AND_FIVE, 0.009, 0.041, 0.008, (v.REAL, "cells")),  # the underpowered abstain: not a disagreement
    (FIVE_AND_FIVE, -0.01, 0.002, 0.008, (v.REAL, "cells")),  # the cells decide when their votes agree
    ([v.UNDERPOWERED, v.UNDERPOWERED, v.NOISE], np.nan, np.nan, np.nan, (v.NOISE, "cells")),
    ([v.REAL, v.NOISE, v.UNDERPOWERED], 0.005, 0.033, 0.008, (v.DISAGREE, "cells")),  # opposed, pooled unclear
    ([v.REAL, v.NOISE], 0.018, 0.042, 0.008, (v.REAL, "pooled drop")),  # opposed, pooled wholly above
    ([v.REAL, v.NOISE], -0.003, 0.007, 0.008, (v.NOISE, "pooled drop")),  # opposed, pooled wholly within
    ([v.UNDERPOWERED] * 3, -0.008, 0.022, 0.008, (v.UNDERPOWERED, "cells")),  # nobody votes, pooled unclear
    ([v.UNDERPOWERED] * 3, 0.011, 0.047, 0.008, (v.REAL, "pooled drop")),
    ([v.UNDERPOWERED] * 3, -0.047, -0.011, 0.008, (v.REAL, "pooled drop")),  # a reliable rise
    ([v.UNDERPOWERED] * 3, 0.008, 0.03, 0.008, (v.UNDERPOWERED, "cells")),  # at the floor is not beyond it
])
def test_language_verdict(cells, low, high, floor, expected):
    assert v.language_verdict(cells, low=low, high=high, floor=floor) == expected


def test_a_language_without_cells_has_no_verdict():
    with pytest.raises(ValueError):
        v.language_verdict([])


def test_power_matches_the_normal_approximation():
    rng = np.random.default_rng(3)
    n, sd, shift = 100, 0.2, 0.05
    changes = rng.normal(0.0, sd, size=n)
    changes = (changes - changes.mean()) / changes.std(ddof=1) * sd  # exactly this scatter
    options = StudyOptions(n_permutations=2000, seed=1)
    power = v.cell_power(changes, shift, np.array([]), options, n_runs=400, key=("m", "xx"))
    expected = norm.cdf(shift * np.sqrt(n) / sd - norm.ppf(0.975))  # two-sided z-test at 0.05: 0.705
    assert power == pytest.approx(expected, abs=0.07)
    assert v.cell_power(changes, 0.0, np.array([]), options, n_runs=400, key=("m", "xx")) < 0.1
    assert v.cell_power(changes, 0.15, np.array([]), options, n_runs=100, key=("m", "xx")) == 1.0
    # other cells in the family make the correction stricter: lower power
    crowded = v.cell_power(changes, shift, np.full(20, 0.9), options, n_runs=400, key=("m", "xx"))
    assert crowded < power


def test_verdicts_of_a_study_whose_truth_is_known():
    rng = np.random.default_rng(11)
    rows = []
    for model in ("m1", "m2"):
        for i in range(120):
            english = float(rng.uniform(0.3, 0.8))
            rows.append(score_row(model, f"b{i}", "en", english))
            for route in ("human-1", "human-2"):
                rows.append(score_row(model, f"b{i}", "en", float(np.clip(english + rng.normal(0, 0.02), 0.01, 0.99)),
                                      variant="rewording", via=route))
            # es: a real drop of 0.12; fr: no shift at all, small scatter; sw: no shift, huge scatter
            for language, shift, sd in (("es", 0.12, 0.05), ("fr", 0.0, 0.01), ("sw", 0.0, 0.3)):
                rows.append(score_row(model, f"b{i}", language,
                                      float(np.clip(english - shift + rng.normal(0, sd), 0.01, 0.99))))
    scores = pd.DataFrame(rows)
    options = StudyOptions(n_permutations=1000, n_bootstrap=200, seed=2)
    cells = analyses.cell_tests(scores, options)
    floors = analyses.floor_cells(scores, options)
    table = v.verdict_cells(scores, options, cells=cells, floors=floors, n_runs=100)
    languages = v.verdict_languages(table, scores, options).set_index("language")
    assert languages.loc["es", "verdict"] == v.REAL and languages.loc["es", "reliable_models"] == 2
    assert languages.loc["fr", "verdict"] == v.NOISE
    sw = table.loc[table["language"] == "sw"]
    assert set(sw["verdict"]) <= {v.NOISE, v.UNDERPOWERED} and (sw["power"] < languages.loc["es", "power"]).all()
    es = table.loc[table["language"] == "es"]
    assert ((es["low"] < 0.12) & (0.12 < es["high"])).all(), "the interval covers the true drop"
