"""The engines and the Ray executor on one CUDA machine (the second half of benchmarks/gpu_check.sh).

Each part runs in its own process (vLLM takes most of a GPU's memory, and Ray's actors need the
GPUs free), reads the default bank's items and writes its scores under $OUT_DIR:

  --part transformers   the model in bf16 through `score()` (packed): seconds, pairs/s, peak memory
  --part vllm           the same items through the vllm engine (bf16): seconds, pairs/s, memory in use
  --part ray --actors N the transformers engine on a Ray pool of N actors, one GPU each: seconds
  --part report         the table: pairs/s; max |Δ log-prob| per option token, vLLM against
                        transformers; items whose preferred option flips; model × language cells whose
                        reliable/not decision differs; the speed-up of every GPU against one

Refuses without CUDA (exit 3). Nothing is downloaded: the model must be in the local cache (or be an
offline short name).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

BANK = "data/items/written.csv"


def items() -> pd.DataFrame:
    from biasaudit.data.item_table import read_items, select_items
    from biasaudit.run.params import DEFAULT_LANGUAGES

    selected, _ = select_items(read_items(BANK), languages=[*DEFAULT_LANGUAGES, "en"],
                               variants=["original", "translation", "rewording"])
    return selected


def part_transformers(model: str, out: Path, device: str) -> dict:
    import torch

    from biasaudit.lm.scoring import score

    table = items()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    scores = score(table, model, device=device, dtype=torch.bfloat16, batch_size="auto", progress=False)
    seconds = time.perf_counter() - started
    scores.to_parquet(out / "transformers.parquet")
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    return {"seconds": seconds, "pairs_per_s": 3 * len(table) / seconds, "peak_gib": peak}


def part_vllm(model: str, out: Path) -> dict:
    import torch

    from biasaudit.run.engine import EngineSpec, ModelScorer

    table = items()
    scorer = ModelScorer(model, EngineSpec(engine="vllm", dtype="bfloat16", check="transformers", max_model_len=1024))
    started = time.perf_counter()
    scorer.engine()  # load and check outside the timing, as transformers' load is outside it
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    scores = scorer.score(table, progress=False)
    seconds = time.perf_counter() - started
    scores.to_parquet(out / "vllm.parquet")
    free, total = torch.cuda.mem_get_info()
    return {"seconds": seconds, "pairs_per_s": 3 * len(table) / seconds, "load_and_check_s": loaded,
            "in_use_gib": (total - free) / 2**30, "check_max_abs_diff": float(scorer.check["max_abs_diff"].max())}


def part_ray(model: str, out: Path, actors: int, device: str) -> dict:
    import ray

    from biasaudit.run.engine import EngineSpec, RayOptions
    from biasaudit.run.ray_executor import score_on_ray

    table = items()
    ray.init(include_dashboard=False, logging_level="ERROR")
    os.environ["BIASAUDIT_RUNS_DIR"] = str(out / "runs")  # an empty store of its own (run_dir reads it per call)
    started = time.perf_counter()
    _, timings = score_on_ray(f"ray-{actors}", table, models=[model], progress=False,
                              spec=EngineSpec(dtype="bfloat16", device=device, batch_size="auto"),
                              options=RayOptions(actors=actors, gpus_per_actor=1 if device == "cuda" else 0,
                                                 shard_items=64))
    seconds = time.perf_counter() - started
    ray.shutdown()
    return {"seconds": seconds, "pairs_per_s": 3 * len(table) / seconds, "actors": actors}


def report(out: Path, results: dict) -> dict:
    from biasaudit.analyses.drops import cell_tests
    from biasaudit.data.item_table import OPTIONS

    rows = [(name, results[key]) for name, key in (("transformers (packed, bf16)", "transformers"),
                                                     ("vllm (bf16)", "vllm")) if key in results]
    rows += [(f"ray, {r['actors']} GPU actor(s)", r) for r in results.get("ray", [])]
    print(pd.DataFrame([{"run": name, **r} for name, r in rows]).to_string(index=False, float_format="%.3g"))
    summary: dict = {}
    if (out / "vllm.parquet").exists() and (out / "transformers.parquet").exists():
        a = pd.read_parquet(out / "transformers.parquet").sort_values("item_id").reset_index(drop=True)
        b = pd.read_parquet(out / "vllm.parquet").sort_values("item_id").reset_index(drop=True)
        per_token = max(float((np.abs(a[f"lp_sum_{o}"] - b[f"lp_sum_{o}"]) / a[f"ntok_{o}"]).max()) for o in OPTIONS)
        prefers = [np.sign(t["lp_mean_stereotyped"] - t["lp_mean_anti_stereotyped"]) for t in (a, b)]
        cells = [cell_tests(t).set_index(["model", "language"])["reliable"] for t in (a, b)]
        summary.update({"max_abs_diff_per_token": per_token, "items": len(a),
                        "preferred_option_flips": int((prefers[0] != prefers[1]).sum()), "cells": len(cells[0]),
                        "cell_decisions_differ": int((cells[0] != cells[1]).sum())})
        print(f"vLLM against transformers on {len(a)} item versions: largest |log-prob difference| per option "
              f"token {per_token:.3g} nats; preferred option flips {summary['preferred_option_flips']}; "
              f"reliable/not decisions that differ {summary['cell_decisions_differ']} of {len(cells[0])} cells")
    ray_runs = results.get("ray", [])
    if len(ray_runs) >= 2:
        summary["ray_speedup"] = ray_runs[0]["seconds"] / ray_runs[-1]["seconds"]
        print(f"Ray: {ray_runs[-1]['actors']} GPUs against 1: {summary['ray_speedup']:.2f}x")
    elif ray_runs:
        print("Ray: this machine has one GPU, so there is no speed-up to measure (one actor was timed)")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", required=True, choices=["transformers", "vllm", "ray", "report"])
    parser.add_argument("--model", default="")
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--out", default="gpu_engines")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: a smoke run of the transformers and ray parts (no timings worth reading)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    if args.part != "report" and args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("gpu_engines: torch sees no CUDA GPU here; nothing was measured", file=sys.stderr)
            sys.exit(3)
    if args.part == "transformers":
        results["transformers"] = part_transformers(args.model, out, args.device)
    elif args.part == "vllm":
        results["vllm"] = part_vllm(args.model, out)
    elif args.part == "ray":
        results.setdefault("ray", []).append(part_ray(args.model, out, args.actors, args.device))
    else:
        results["summary"] = report(out, results)
    results_file.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
