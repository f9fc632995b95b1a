"""The fault sweep (`make sweep`): every case ends in the right result, a clear error naming what is
wrong, or a recovered fault, with nothing lost. Each case checks the program's behaviour itself
(the error must name the file, row and field or the params key; an interrupted run must end with
the table of an uninterrupted one and nothing scored twice); here every case must pass."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from biasaudit.core import sweep_record
from biasaudit.sweep import cases, harness, kills
from biasaudit.sweep.__main__ import main as sweep_main

KILLED = "runs: killed and resumed"  # run (once) by its own test below, which looks closer


@pytest.mark.parametrize("name", [name for name in cases.CASES if name != KILLED])
def test_sweep_case(name):
    outcome = cases.run_case(name)
    assert outcome.outcome in sweep_record.GOOD_OUTCOMES and outcome.lost == 0, outcome
    expected = (sweep_record.CLEAR if name in cases.ERROR_CASES else sweep_record.RECOVERED if name in cases.RECOVERING
                else sweep_record.RIGHT)
    assert outcome.outcome == expected and outcome.said, outcome


def test_the_network_guard_refuses_and_logs(tmp_path):
    """The no-network case means something only if its guard stops a real connection."""
    env = harness.python_env(harness.network_guard(tmp_path))
    code = "import urllib.request; urllib.request.urlopen('http://example.org', timeout=5)"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "network access refused" in result.stderr
    assert "resolve example.org" in (tmp_path / "attempts.log").read_text()
    assert (tmp_path / "attempts.log.guarded").read_text().strip(), "the guard says it was loaded"


def test_a_failing_case_is_reported_as_failed(monkeypatch):
    """A case whose program accepts bad input is a failure of the sweep, not a pass."""
    monkeypatch.setitem(cases.CASES, "params: unknown key",
                        ("params", cases._params_case("languages: [es]\n", ["'languages'"])))
    outcome = cases.run_case("params: unknown key")
    assert outcome.outcome.startswith("FAILED") and "no error" in outcome.outcome


def test_the_command_writes_the_table_and_fails_on_a_failed_case(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    assert sweep_main(["--only", "params: unknown key", "items: BOM and CRLF"]) == 0
    table, meta = sweep_record.read_last_sweep()
    assert list(table["case"]) == ["params: unknown key", "items: BOM and CRLF"] and meta["cases"] == 2
    assert meta["all_cases"] == len(cases.CASES) and meta["slow_cases"] == list(cases.SLOW_CASES)
    assert sweep_record.counts(table) == {"cases": 2, "clear_errors": 1, "recovered": 0, "right_results": 1, "failed": 0,
                                   "lost": 0}
    monkeypatch.setitem(cases.CASES, "params: unknown key",
                        ("params", cases._params_case("languages: [es]\n", ["'languages'"])))
    assert sweep_main(["--only", "params: unknown key"]) == 1


def test_a_killed_run_is_resumed_from_a_partly_stored_run(monkeypatch):
    """The kill-and-resume case as the sweep runs it: besides its outcome, the kills must have left
    partly stored runs (the case once killed six times before the first chunk was stored, and so
    never tested resuming) and one must have caught a chunk's file written but not renamed."""
    found = []

    def recording(folder):
        run = kills.kill_and_resume(folder)
        parts = sorted((folder / "killed" / "scores").glob("part-*.parquet"))
        found.append((run, pd.concat([pd.read_parquet(p) for p in parts]), pd.read_parquet(folder / "items.parquet")))
        return kills.describe_killed_run(run)

    monkeypatch.setitem(cases.CASES, KILLED, ("runs", recording))
    outcome = cases.run_case(KILLED)
    assert outcome.outcome == sweep_record.RECOVERED and outcome.lost == 0 and outcome.said, outcome
    (run, stored, items), = found
    after = [hit.stored for hit in run.kills]
    assert run.kills[0].place == "during model load" and after[0] == 0
    assert any(0 < count < run.total for count in after), after
    assert all(a < b for a, b in zip(after, after[1:])), after  # every later kill lands further on
    assert any(hit.writing and hit.partial_seen for hit in run.kills), run.kills
    assert run.last_scored == run.total - after[-1]
    # The store itself, read here: every version once, none missing
    assert run.total == len(items) and not stored["item_id"].duplicated().any()
    assert set(stored["item_id"]) == set(items["item_id"])


def _scores() -> pd.DataFrame:
    from biasaudit.run.synthetic import synthetic_scores

    return synthetic_scores(harness.bank_rows(), ["m1"])


def test_the_resume_check_passes_every_version_stored_once():
    reference = _scores()
    assert kills.check_resumed(reference.sample(frac=1.0, random_state=0), reference) == 0


def test_a_resume_that_scores_a_stored_version_again_fails():
    """What a worker that ignores the store (and rescores what was stored) leaves behind."""
    reference = _scores()
    again = pd.concat([reference, reference.iloc[[3]]], ignore_index=True)
    with pytest.raises(harness.CaseFailed, match="1 stored row"):
        kills.check_resumed(again, reference)


@pytest.mark.parametrize("damage", ["lose", "change"])
def test_a_resume_that_loses_or_changes_a_version_fails(damage):
    reference = _scores()
    rows = reference.drop(index=5) if damage == "lose" else reference.assign(
        lp_sum_third=np.where(reference.index == 5, reference["lp_sum_third"] - 0.01, reference["lp_sum_third"]))
    with pytest.raises(harness.CaseFailed, match="1 version"):
        kills.check_resumed(rows, reference)


def test_kills_that_all_land_before_the_first_chunk_fail_the_case():
    """The kills of the old case (by time, all before anything was stored) must not pass."""
    early = [kills.Kill("during model load", 0)] + [kills.Kill("0.5 s into scoring", 0) for _ in range(5)]
    with pytest.raises(harness.CaseFailed, match="no kill landed mid-run"):
        kills.check_kills(early, 704)
    with pytest.raises(harness.CaseFailed, match="no kill landed mid-run"):  # nor kills after the end
        kills.check_kills([kills.Kill("during model load", 0), kills.Kill("after 176 chunks stored", 704)], 704)


def test_kills_without_one_during_a_write_fail_the_case():
    between = [kills.Kill("during model load", 0), kills.Kill("after 3 chunks stored", 12)]
    with pytest.raises(harness.CaseFailed, match="being written"):
        kills.check_kills(between, 704)
    missed = kills.Kill("while chunk 5 was being written", 16, writing=True, partial_seen=False)
    with pytest.raises(harness.CaseFailed, match="being written"):
        kills.check_kills([*between, missed], 704)
    kills.check_kills([*between, kills.Kill("while chunk 5 was being written", 16, writing=True,
                                            partial_seen=True)], 704)


@pytest.mark.parametrize("chunks", [10, 44, 176, 1000])
def test_kill_points_are_spread_over_the_run_and_short_of_its_end(chunks):
    for seed in range(20):
        points = kills._kill_points(chunks, np.random.default_rng(seed))
        assert [kind for kind, _ in points] == ["load", "stored", "writing", "stored", "stored"]
        stored_after = [0, points[1][1], points[2][1] - 1, points[3][1], points[4][1]]  # a write stores nothing
        assert all(a < b for a, b in zip(stored_after, stored_after[1:])), points
        assert points[1][1] <= 0.25 * chunks + 1 and points[4][1] >= 0.75 * chunks - 1, points
        assert points[4][1] < chunks, points


def test_the_book_runs_the_quick_cases_only_where_no_full_sweep_is(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    assert "runs: killed and resumed" not in cases.QUICK_CASES and "params: unknown key" in cases.QUICK_CASES
    monkeypatch.setattr(cases, "QUICK_CASES", ("params: unknown key", "items: BOM and CRLF"))
    path = cases.quick_sweep()
    assert path is not None and path.name == "quick.csv" and sweep_record.read_last_sweep() is None
    table, meta = sweep_record.read_last_sweep(kind="quick")
    assert list(table["case"]) == ["params: unknown key", "items: BOM and CRLF"] and meta["cases"] == 2
    assert meta["all_cases"] == len(cases.CASES) and meta["slow_cases"] == list(cases.SLOW_CASES)
    assert sweep_main(["--only", "params: unknown key"]) == 0  # a sweep of the machine's own
    assert cases.quick_sweep() is None
