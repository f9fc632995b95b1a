"""The tables a computing step leaves for its chapter to read: runs/<run>/steps/<step>/.

Scoring (chapter 02), translating and judging (01), rerunning the pipeline errors (20), asking the
template tests (30) and comparing translators (31) are pipeline steps: each computes its tables once
and writes them here (scores themselves go to the run's score store, `core.store`), and the
chapter's `report(params)` only reads and formats them. A step removes its old `step.json`, writes
its tables, and writes its new `step.json` (the params it was made with, and a few values) last,
each file under a temporary name renamed into place, so a step killed half-way leaves no `step.json` and is simply run again (the model outputs it
had made are in the shared caches, so nothing is asked twice). A chapter reading tables made with
other params gets an error saying which step to run, never stale numbers.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from biasaudit.core.paths import run_dir
from biasaudit.core.store import write_atomically

STEP_COMMANDS: dict[str, str] = {
    "score": "biasaudit.run.pipeline.run_scoring(params)",
    "label_errors": "biasaudit.run.pipeline.run_error_reruns(params)",
    "translate": "biasaudit.translate.step.run_translation(params)",
    "template_tests": "biasaudit.templates.step.run_template_step(params)",
    "template_translation": "biasaudit.templates.comparison.run_comparison(params)",
}


class StepError(RuntimeError):
    """A step's tables are missing, or were made with other params."""


@dataclass
class StepTables:
    """A step's tables by name, and the small values it kept beside them."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.tables[name]


def step_dir(run_name: str, step: str) -> Path:
    return run_dir(run_name) / "steps" / step


def _params_key(params) -> dict:
    return json.loads(params.model_dump_json())


def write_step(params, step: str, made: StepTables) -> Path:
    """Write a step's tables, then its step.json (the params it was made with, its values)."""
    folder = step_dir(params.run_name, step)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step.json").unlink(missing_ok=True)  # from here until the end, the step counts as not run
    for name, table in made.tables.items():
        write_atomically(table, folder / f"{name}.parquet")
    record = {"params": _params_key(params), "tables": sorted(made.tables), "values": made.values}
    partial = folder / f".step.json.{uuid.uuid4().hex[:8]}.partial"
    partial.write_text(json.dumps(record, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    os.replace(partial, folder / "step.json")
    return folder


def _record(run: Any, step: str) -> dict | None:
    """The step's step.json of a run (its name, or params that name it), or None."""
    path = step_dir(run if isinstance(run, str) else run.run_name, step) / "step.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def step_params(run_name: str, step: str) -> dict | None:
    """The params a run's step last ran with (as `RunParams.model_dump` gives them), or None if it has not."""
    record = _record(run_name, step)
    return record["params"] if record else None


def is_current(params, step: str) -> bool:
    """Whether the step's tables on disk were made with exactly these params."""
    record = _record(params, step)
    return record is not None and record["params"] == _params_key(params)


def read_step(params, step: str) -> StepTables:
    """The step's tables as they were written, or a StepError saying which step to run."""
    record = _record(params, step)
    folder = step_dir(params.run_name, step)
    how = f"run {STEP_COMMANDS.get(step, step)} first (the chapter's notebook does)"
    if record is None:
        raise StepError(f"{folder}: the step {step!r} has not run for run {params.run_name!r}; {how}")
    if record["params"] != _params_key(params):
        changed = sorted(k for k, v in _params_key(params).items() if record["params"].get(k) != v)
        raise StepError(f"{folder}: the step {step!r} ran with other params (changed: {', '.join(changed)}); {how}")
    tables = {name: pd.read_parquet(folder / f"{name}.parquet") for name in record["tables"]}
    return StepTables(tables, record["values"])
