"""The fault sweep (`make sweep`): every case ends in the right result, a clear error naming what is
wrong, or a recovered fault, with nothing lost. Each case checks the program's behaviour itself
(the error must name the file, row and field or the params key; an interrupted run must end with
the table of an uninterrupted one and nothing scored twice); here every case must pass."""

from __future__ import annotations

import subprocess
import sys

import pytest
from biasaudit import sweep


@pytest.mark.parametrize("name", list(sweep.CASES))
def test_sweep_case(name):
    outcome = sweep.run_case(name)
    assert outcome.outcome in sweep.GOOD_OUTCOMES and outcome.lost == 0, outcome
    expected = (sweep.CLEAR if name in sweep.ERROR_CASES else sweep.RECOVERED if name in sweep.RECOVERING
                else sweep.RIGHT)
    assert outcome.outcome == expected and outcome.said, outcome


def test_the_network_guard_refuses_and_logs(tmp_path):
    """The no-network case means something only if its guard stops a real connection."""
    env = sweep.python_env(sweep.network_guard(tmp_path))
    code = "import urllib.request; urllib.request.urlopen('http://example.org', timeout=5)"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "network access refused" in result.stderr
    assert "resolve example.org" in (tmp_path / "attempts.log").read_text()
    assert (tmp_path / "attempts.log.guarded").read_text().strip(), "the guard says it was loaded"


def test_a_failing_case_is_reported_as_failed(monkeypatch):
    """A case whose program accepts bad input is a failure of the sweep, not a pass."""
    monkeypatch.setitem(sweep.CASES, "params: unknown key",
                        ("params", sweep._params_case("languages: [es]\n", ["'languages'"])))
    outcome = sweep.run_case("params: unknown key")
    assert outcome.outcome.startswith("FAILED") and "no error" in outcome.outcome


def test_the_command_writes_the_table_and_fails_on_a_failed_case(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    assert sweep.main(["--only", "params: unknown key", "items: BOM and CRLF"]) == 0
    table, meta = sweep.read_last_sweep()
    assert list(table["case"]) == ["params: unknown key", "items: BOM and CRLF"] and meta["cases"] == 2
    assert sweep.counts(table) == {"cases": 2, "clear_errors": 1, "recovered": 0, "right_results": 1, "failed": 0,
                                   "lost": 0}
    monkeypatch.setitem(sweep.CASES, "params: unknown key",
                        ("params", sweep._params_case("languages: [es]\n", ["'languages'"])))
    assert sweep.main(["--only", "params: unknown key"]) == 1
