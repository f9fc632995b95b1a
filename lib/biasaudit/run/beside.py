"""A run of new models beside the paper's ten released ones: which models the run scored itself.

`run.pipeline.prepare_beside_paper` writes runs/<run>/beside.json; every page that names a model reads
it (`shown_model`), so that a model scored here is never shown as one of the paper's.
"""

from __future__ import annotations

import json

from biasaudit.core.paths import run_dir

BESIDE_FILE = "beside.json"
OWN_ITEMS_FILE = "own_items.parquet"
THIS_RUN = " (this run)"


def own_models(run_name: str) -> list[str]:
    """The models a run scored itself beside the paper's released ten (empty: not such a run)."""
    path = run_dir(run_name) / BESIDE_FILE
    return list(json.loads(path.read_text(encoding="utf-8"))["this_run"]) if path.exists() else []


def shown_model(model: str, own: list[str]) -> str:
    """A model's name as the pages show it: marked when this run scored it beside the paper's models."""
    return model + THIS_RUN if model in own else model
