"""The fault sweep's record: the table a sweep writes (`biasaudit.sweep`, `make sweep`, or the quick
subset a book build runs) and the book's reliability appendix reads, with the facts written beside it.
It lives on the ground floor so that the book reads it without importing the sweep, which exercises
the book among everything else."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

from biasaudit.core.paths import run_dir

RIGHT, CLEAR, RECOVERED = "right result", "clear error", "recovered"
GOOD_OUTCOMES = (RIGHT, CLEAR, RECOVERED)
SWEEP_COLUMNS = ["case", "group", "done", "said", "outcome", "lost"]


def sweep_folder() -> Path:
    return run_dir("sweep")


def write_sweep(table: pd.DataFrame, seconds: float, folder: Path | None = None, *, kind: str = "sweep",
                all_cases: int = 0, slow_cases: tuple[str, ...] = ()) -> Path:
    """The sweep's table and facts: `kind` "sweep" for `make sweep`'s, "quick" for the quick subset a book
    build runs when the machine has no sweep of its own (`cases.quick_sweep`), which also records how many
    cases the full sweep has and which slow ones it left out."""
    folder = folder or sweep_folder()
    table.to_csv(folder / f"{kind}.csv", index=False)
    meta = {"finished": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(seconds, 1), "cases": len(table),
            "python": sys.version.split()[0], "all_cases": all_cases, "slow_cases": list(slow_cases)}
    (folder / f"{kind}.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return folder / f"{kind}.csv"


def read_last_sweep(folder: Path | None = None, *, kind: str = "sweep") -> tuple[pd.DataFrame, dict] | None:
    """The table and facts of the last sweep of this `kind` on this machine, or None."""
    folder = folder or sweep_folder()
    if not (folder / f"{kind}.csv").exists():
        return None
    table = pd.read_csv(folder / f"{kind}.csv", keep_default_na=False)
    meta = json.loads((folder / f"{kind}.json").read_text(encoding="utf-8")) if (folder / f"{kind}.json").exists() else {}
    return table, meta


def counts(table: pd.DataFrame) -> dict[str, int]:
    return {"cases": len(table), "clear_errors": int((table["outcome"] == CLEAR).sum()),
            "recovered": int((table["outcome"] == RECOVERED).sum()),
            "right_results": int((table["outcome"] == RIGHT).sum()),
            "failed": int((~table["outcome"].isin(GOOD_OUTCOMES)).sum()), "lost": int(table["lost"].sum())}
