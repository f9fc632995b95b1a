"""benchmarks/bf16_agreement.py counts the cells whose reliable decision changes, and only those."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def agreement():
    spec = importlib.util.spec_from_file_location("bf16_agreement", ROOT / "benchmarks" / "bf16_agreement.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _cells(q: list[float], q_binary: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"model": ["m", "m", "n"], "language": ["es", "zh", "es"], "q": q, "q_binary": q_binary,
                         "reliable": [v < 0.05 for v in q], "reliable_binary": [v < 0.05 for v in q_binary],
                         "drop": [0.1, 0.0, -0.2]})


def test_decision_changes_names_the_cells_that_cross_alpha(agreement):
    fp32 = _cells([0.01, 0.30, 0.049], [0.02, 0.5, 0.9])
    bf16 = _cells([0.02, 0.20, 0.051], [0.06, 0.5, 0.9]).iloc[::-1]  # order must not matter
    out = agreement.decision_changes(fp32, bf16, "language")
    assert out["cells"] == 3 and out["reliable_a"] == 2 and out["reliable_b"] == 1
    assert [(c["model"], c["language"]) for c in out["changed_reliable"]] == [("n", "es")]
    assert [(c["model"], c["language"]) for c in out["changed_reliable_binary"]] == [("m", "es")]
    assert out["changed_reliable_binary"][0]["q_binary_b"] == pytest.approx(0.06)
    assert out["max_abs_delta_q"] == pytest.approx(0.1) and out["closest_q_to_alpha"] == pytest.approx(0.001)


def test_the_default_run_items_are_the_banks_selection(agreement):
    from biasaudit.run.params import RunParams

    items = agreement.default_run_items()
    assert len(items) > 0 and items["item_id"].is_unique
    assert set(items["variant"]) == {"original", "translation", "rewording"}
    assert set(items["language"]) == {*RunParams().languages, "en"}
