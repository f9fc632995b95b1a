"""The run store: scores appended as parts and read back as one table, results computed once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biasaudit.core.store import ResultStore, ScoreStore, StoreWarning, table_fingerprint


def rows(model: str, ids: list[str], value: float, boundary: bool = False) -> pd.DataFrame:
    return pd.DataFrame({"model": model, "scorer_boundary": boundary, "item_id": ids, "lp": value})


def test_parts_are_appended_and_the_latest_row_wins(tmp_path):
    store = ScoreStore(tmp_path)
    assert not store.exists() and store.read().empty
    store.append(rows("m", ["a", "b"], 1.0))
    store.append(rows("m", ["b", "c"], 2.0))  # b rescored (its text changed, say)
    store.append(rows("m", ["a"], 3.0, boundary=True))  # another setting: a separate key
    assert len(store.parts()) == 3
    table = store.read().set_index(["scorer_boundary", "item_id"])["lp"]
    assert table.to_dict() == {(False, "a"): 1.0, (False, "b"): 2.0, (False, "c"): 2.0, (True, "a"): 3.0}
    assert len(store.read(scorer_boundary=True)) == 1 and store.read(model="other").empty


def test_appending_never_rewrites_a_stored_part(tmp_path):
    store = ScoreStore(tmp_path)
    first = store.append(rows("m", ["a"], 1.0))
    before = first.stat().st_mtime_ns, first.read_bytes()
    store.append(rows("m", ["b"], 2.0))
    assert (first.stat().st_mtime_ns, first.read_bytes()) == before
    assert not list(store.folder.glob("*.partial"))


def test_compaction_keeps_the_table(tmp_path):
    store = ScoreStore(tmp_path)
    for k in range(5):
        store.append(rows("m", [f"i{k}", "shared"], float(k)))
    before = store.read().sort_values("item_id").reset_index(drop=True)
    store.compact()
    assert len(store.parts()) == 1
    pd.testing.assert_frame_equal(store.read().sort_values("item_id").reset_index(drop=True), before)
    assert before.set_index("item_id").loc["shared", "lp"] == 4.0


def test_a_corrupt_part_is_set_aside_with_a_message(tmp_path):
    store = ScoreStore(tmp_path)
    store.append(rows("m", ["a"], 1.0))
    broken = store.append(rows("m", ["b"], 2.0))
    broken.write_bytes(broken.read_bytes()[:20])  # truncated, as by a full disk
    with pytest.warns(StoreWarning, match="set aside"):
        table = store.read()
    assert list(table["item_id"]) == ["a"], "the unreadable rows count as not yet done"
    assert broken.with_name(broken.name + ".corrupt").exists() and not broken.exists()


def test_legacy_single_files_are_read_as_the_oldest_parts(tmp_path):
    rows("m", ["a", "b"], 1.0).to_parquet(tmp_path / "scores.parquet", index=False)
    store = ScoreStore(tmp_path)
    store.append(rows("m", ["b"], 5.0))
    assert store.read().set_index("item_id")["lp"].to_dict() == {"a": 1.0, "b": 5.0}


def test_results_are_computed_once_per_key(tmp_path):
    results = ResultStore(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return pd.DataFrame({"x": np.arange(3.0), "ok": [True, False, True]})

    first = results.get("cells", "k1", compute)
    again = results.get("cells", "k1", compute)
    pd.testing.assert_frame_equal(first, again)
    assert len(calls) == 1
    results.get("cells", "k2", compute)
    assert len(calls) == 2


def test_fingerprint_sees_any_change():
    table = pd.DataFrame({"model": ["m", "m"], "lp": [0.1, 0.2]})
    assert table_fingerprint(table) == table_fingerprint(table.copy())
    assert table_fingerprint(table) != table_fingerprint(table.assign(lp=[0.1, 0.2000001]))
    assert table_fingerprint(table) != table_fingerprint(table.rename(columns={"lp": "lq"}))
    assert table_fingerprint(table) != table_fingerprint(table.iloc[::-1])


def test_the_run_lock_names_its_holder_is_reentrant_and_is_released(tmp_path):
    import json
    import os

    from biasaudit.core.store import run_lock

    with run_lock(tmp_path) as path:
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder["host"]
        with run_lock(tmp_path):  # a writer calling another writer in the same process
            assert json.loads(path.read_text())["pid"] == os.getpid()
        assert json.loads(path.read_text())["pid"] == os.getpid(), "the inner exit keeps the outer lock"
    assert path.read_text() == "", "released: no holder named"
    with run_lock(tmp_path):
        pass
