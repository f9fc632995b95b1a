"""Does scoring in bf16 change any result of the default run? fp32 against bf16, on the whole default bank.

Run: `.venv/bin/python benchmarks/bf16_agreement.py [--models smollm2-135m,gemma3-270m] [--json out.json]`
(about ten minutes of a 2-core CPU per model).

The item versions of the default run (`params/default.yml`'s defaults: data/items/written.csv, its
languages and rewordings) are scored with each model in float32 and in bfloat16. Compared:
- per item version, the soft score (sigmoid of the stereotyped minus anti-stereotyped per-token
  mean log-prob, `analyses.item_scores`): max |delta soft| and binary preference flips;
- chapter 10's cell tests (`analyses.drops.cell_tests`: every model x language cell, sign-flip
  test and Benjamini-Hochberg, with `options.DEFAULT_OPTIONS`) and the noise floor's cells
  (`analyses.floor.floor_cells`): whether any cell's reliable / not reliable decision changes
  (soft and binary), and how far the q-values move.
When the default run's stored fp32 scores are at hand (runs/default/), the fresh fp32 scores are
also checked against them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from biasaudit.analyses.drops import cell_tests
from biasaudit.analyses.floor import floor_cells
from biasaudit.analyses.scores import item_scores
from biasaudit.core.options import DEFAULT_OPTIONS
from biasaudit.core.paths import project_path, run_dir
from biasaudit.core.store import SCORE_COLUMNS, ScoreStore
from biasaudit.data.item_table import read_items, select_items
from biasaudit.lm.registry import cpu_has_native_bf16, load_model
from biasaudit.lm.scoring import score
from biasaudit.run.params import RunParams

DTYPES = ("float32", "bfloat16")


def default_run_items() -> pd.DataFrame:
    """The item versions the default run scores (the bank(s), languages and variants of RunParams())."""
    params = RunParams()
    bank = pd.concat([read_items(project_path(path)) for path in params.item_banks], ignore_index=True)
    variants = ["original", "translation", "rewording"] if params.include_rewordings else ["original", "translation"]
    items, _ = select_items(bank, languages=[*params.languages, "en"], variants=variants)
    return items


def soft_agreement(reference: pd.DataFrame, other: pd.DataFrame) -> dict:
    a, b = item_scores(reference, DEFAULT_OPTIONS.aggregate), item_scores(other, DEFAULT_OPTIONS.aggregate)
    delta = np.abs(a["soft"].to_numpy() - b["soft"].to_numpy())
    lp = np.abs(reference[[c for c in SCORE_COLUMNS if c.startswith("lp_mean")]].to_numpy()
                - other[[c for c in SCORE_COLUMNS if c.startswith("lp_mean")]].to_numpy())
    return {"versions": len(a), "max_abs_delta_soft": float(delta.max()), "mean_abs_delta_soft": float(delta.mean()),
            "max_abs_delta_lp_mean": float(lp.max()), "binary_flips": int((a["binary"] != b["binary"]).sum())}


def decision_changes(reference: pd.DataFrame, other: pd.DataFrame, group: str) -> dict:
    """Cells whose reliable decision differs between two cell tables (same cells, same order)."""
    keys = ["model", group]
    merged = reference.merge(other, on=keys, suffixes=("_a", "_b"), validate="one_to_one")
    q_of = {"reliable": "q", "reliable_binary": "q_binary"}
    changed = {column: merged.loc[merged[f"{column}_a"] != merged[f"{column}_b"],
                                  [*keys, f"{q_of[column]}_a", f"{q_of[column]}_b"]].to_dict("records")
               for column in ("reliable", "reliable_binary")}
    alpha = DEFAULT_OPTIONS.alpha
    return {"cells": len(merged), "reliable_a": int(merged["reliable_a"].sum()),
            "reliable_b": int(merged["reliable_b"].sum()),
            "changed_reliable": changed["reliable"], "changed_reliable_binary": changed["reliable_binary"],
            "max_abs_delta_q": float(np.nanmax(np.abs(merged["q_a"] - merged["q_b"]))),
            "max_abs_delta_drop": float(np.nanmax(np.abs(merged["drop_a"] - merged["drop_b"]))),
            "closest_q_to_alpha": float(np.nanmin(np.abs(merged[["q_a", "q_b"]].to_numpy() - alpha)))}


def stored_check(fresh: pd.DataFrame, model: str) -> dict | None:
    """The fresh fp32 scores against those the default run stored, on the versions whose texts match."""
    store = ScoreStore(run_dir("default"))
    if not store.exists():
        return None
    stored = store.read(model=model, scorer_boundary=False)
    if stored.empty:
        return None
    texts = ["item_id", "context", "stereotyped", "anti_stereotyped", "third", "language"]
    merged = fresh.merge(stored[[*texts, *SCORE_COLUMNS]], on=texts, suffixes=("", "_stored"))
    columns = [c for c in SCORE_COLUMNS if c.startswith("lp_sum")]
    delta = np.abs(merged[columns].to_numpy() - merged[[f"{c}_stored" for c in columns]].to_numpy())
    return {"versions_matched": len(merged), "max_abs_delta_lp_sum": float(delta.max()) if len(merged) else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--save-scores", type=Path, help="a folder for the two scores tables (parquet)")
    args = parser.parse_args(argv)
    if not cpu_has_native_bf16():
        print("note: this CPU has no native bf16; bf16 is emulated and the speed-up is not the fast path's",
              file=sys.stderr)
    items = default_run_items()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    print(f"{len(items)} item versions, models {models}, torch threads {torch.get_num_threads()}", flush=True)
    tables: dict[str, list[pd.DataFrame]] = {dtype: [] for dtype in DTYPES}
    results: dict = {"items": len(items), "models": {}, "torch_threads": torch.get_num_threads()}
    for model in models:
        entry = {}
        for dtype in DTYPES:
            pair = load_model(model, device="cpu", dtype=getattr(torch, dtype))
            score(items.head(4), pair, model_name=model, progress=False)  # warm-up
            started = time.perf_counter()
            table = score(items, pair, model_name=model, batch_size=args.batch_size, progress=False)
            entry[f"seconds_{dtype}"] = time.perf_counter() - started
            tables[dtype].append(table)
            del pair
        entry["speedup"] = entry["seconds_float32"] / entry["seconds_bfloat16"]
        entry.update(soft_agreement(tables["float32"][-1], tables["bfloat16"][-1]))
        entry["fp32_vs_stored"] = stored_check(tables["float32"][-1], model)
        results["models"][model] = entry
        print(model, json.dumps(entry), flush=True)
    both = {dtype: pd.concat(tables[dtype], ignore_index=True) for dtype in DTYPES}
    if args.save_scores:
        args.save_scores.mkdir(parents=True, exist_ok=True)
        for dtype, table in both.items():
            table.to_parquet(args.save_scores / f"scores_{dtype}.parquet", index=False)
    results["language_cells"] = decision_changes(cell_tests(both["float32"], DEFAULT_OPTIONS),
                                                 cell_tests(both["bfloat16"], DEFAULT_OPTIONS), "language")
    results["floor_cells"] = decision_changes(floor_cells(both["float32"], DEFAULT_OPTIONS),
                                              floor_cells(both["bfloat16"], DEFAULT_OPTIONS), "via")
    print(json.dumps({k: v for k, v in results.items() if k != "models"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
