"""A Study computes each expensive table once per run, options and scores, and gives the numbers
the analyses give when called directly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.core.options import StudyOptions
from biasaudit.core.store import ScoreStore
from biasaudit.run.study import Study
from conftest import score_row

OPTIONS = StudyOptions(n_permutations=300, n_bootstrap=100, seed=3)


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    rows = []
    for model in ("m1", "m2"):
        for i in range(10):
            english = float(rng.uniform(0.3, 0.8))
            rows.append(score_row(model, f"b{i}", "en", english))
            rows.append(score_row(model, f"b{i}", "sw", float(np.clip(english - 0.05 + rng.normal(0, 0.05), 0.01, 0.99))))
            for route in ("human-1", "human-2"):
                rows.append(score_row(model, f"b{i}", "en", float(np.clip(english + rng.normal(0, 0.03), 0.01, 0.99)),
                                      variant="rewording", via=route))
    scores = pd.DataFrame(rows).assign(scorer_boundary=False)
    folder = tmp_path / "t"
    folder.mkdir()
    scores.drop_duplicates("item_id").drop(columns=[c for c in scores.columns if c.startswith(("lp_", "ntok_"))]
                                           + ["model", "scorer_boundary"]).to_parquet(folder / "items.parquet")
    ScoreStore(folder).append(scores)
    return scores


def test_study_tables_are_the_analyses(run):
    study = Study("t", OPTIONS)
    scores = study.scores
    pd.testing.assert_frame_equal(study.cells(), analyses.cell_tests(scores, OPTIONS))
    pd.testing.assert_frame_equal(study.floor_cells(), analyses.floor_cells(scores, OPTIONS))
    pd.testing.assert_frame_equal(study.gaps(), analyses.model_gaps(scores, OPTIONS))
    pd.testing.assert_frame_equal(study.language_drops(), analyses.language_drops(scores, OPTIONS))
    pd.testing.assert_frame_equal(study.noise_floor(), analyses.noise_floor(scores, OPTIONS))


def test_each_table_is_computed_once_and_read_back_exactly(run, monkeypatch):
    first = Study("t", OPTIONS).cells()
    calls = []
    real = analyses.cell_tests
    monkeypatch.setattr(analyses, "cell_tests", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = Study("t", OPTIONS).cells()  # a later chapter: a new Study on the same run
    assert calls == [] and again.equals(first)
    Study("t", OPTIONS.but(alpha=0.1)).cells()  # other options: computed afresh
    assert calls == [1]


def test_rescored_scores_are_not_served_stale_results(run, tmp_path):
    before = Study("t", OPTIONS).cells()
    changed = run.assign(lp_mean_stereotyped=run["lp_mean_stereotyped"] + np.where(run["language"] == "sw", -0.5, 0.0))
    ScoreStore(tmp_path / "t").append(changed)
    after = Study("t", OPTIONS).cells()
    assert (after["drop"] > before["drop"]).all()
