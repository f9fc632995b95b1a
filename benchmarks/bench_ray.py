"""The Ray executor's overhead against the local executor, on the default run's scoring.

The default run (params/default.yml: SmolLM2-135M and Gemma-3-270M on the project's item bank) is
scored twice from an empty store, on the same cores: once in this process (torch using every core,
one model after another) and once on a local Ray cluster with one actor per core (`ray_cpus_per_actor`
1: Ray gives each actor one thread). Prints the wall times and their ratio, where the Ray run's time
went (starting the cluster, the actors' model loads and scoring, the first and last shard stored), and
the largest difference between the two runs' log-probs per token.

    .venv/bin/pip install -e '.[ray]' && .venv/bin/python benchmarks/bench_ray.py
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/default.yml")
    parser.add_argument("--actors", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--shard-items", type=int, default=64)
    parser.add_argument("--json", default="", help="also write the numbers to this file")
    args = parser.parse_args()
    runs = tempfile.mkdtemp(prefix="bench-ray-")
    os.environ["BIASAUDIT_RUNS_DIR"] = runs  # before the project is imported: empty stores, nothing reused

    import ray

    from biasaudit.data.item_table import OPTIONS
    from biasaudit.run import pipeline
    from biasaudit.run.engine import EngineSpec, RayOptions
    from biasaudit.run.params import read_params
    from biasaudit.run.ray_executor import score_on_ray

    params = read_params(args.params)
    items, _ = pipeline.prepare_items("local", item_banks=list(params.item_banks), languages=list(params.languages),
                                      include_rewordings=params.include_rewordings)
    pipeline.prepare_items("ray", item_banks=list(params.item_banks), languages=list(params.languages),
                           include_rewordings=params.include_rewordings)
    models, spec = list(params.models), EngineSpec.from_params(params)
    for model in models:  # convert the offline models once, outside both timings
        pipeline.score_run("warm", items.head(1), models=[model])

    started = time.perf_counter()
    local, local_timings = pipeline.score_run("local", items, models=models, spec=spec)
    local_wall = time.perf_counter() - started

    started = time.perf_counter()
    ray.init(num_cpus=args.actors, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    init = time.perf_counter() - started
    stored_at: list[float] = []
    started = time.perf_counter()
    pooled, ray_timings = score_on_ray(
        "ray", items, models=models, spec=spec, progress=False,
        options=RayOptions(actors=args.actors, cpus_per_actor=1, shard_items=args.shard_items),
        after_store=lambda n, busy: stored_at.append(time.perf_counter() - started))
    pool_wall = time.perf_counter() - started
    ray.shutdown()

    key = ["model", "item_id"]
    a, b = local.sort_values(key).reset_index(drop=True), pooled.sort_values(key).reset_index(drop=True)
    per_token = max(float((np.abs(a[f"lp_sum_{o}"] - b[f"lp_sum_{o}"]) / a[f"ntok_{o}"]).max()) for o in OPTIONS)
    actor_seconds = float(ray_timings["seconds"].sum())
    load_seconds = float(ray_timings["load_seconds"].sum())
    rows = pd.DataFrame([
        {"executor": "local (1 process, torch on every core)", "wall_s": local_wall,
         "scoring_s": float(local_timings["seconds"].sum()), "start_s": 0.0},
        {"executor": f"ray ({args.actors} actors x 1 CPU)", "wall_s": init + pool_wall, "scoring_s": actor_seconds,
         "start_s": init},
    ])
    print(f"{len(items):,} item versions x {len(models)} models; shards of {args.shard_items}")
    print(rows.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    print(f"wall-time ratio ray / local: {(init + pool_wall) / local_wall:.2f}")
    print(f"where the Ray run's {init + pool_wall:.1f} s went: {init:.1f} s starting the cluster; "
          f"{load_seconds:.1f} s of actor time loading models and {actor_seconds:.1f} s scoring, over "
          f"{args.actors} actors ({(load_seconds + actor_seconds) / args.actors:.1f} s each, of {pool_wall:.1f} s); "
          f"first shard stored after {stored_at[0]:.1f} s (actor start, imports, model load), last after "
          f"{stored_at[-1]:.1f} s")
    print(f"largest |log-prob difference| per token, ray vs local: {per_token:.2e}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "items": len(items), "models": models, "actors": args.actors, "local_wall_s": local_wall,
            "ray_init_s": init, "ray_pool_s": pool_wall, "ray_actor_seconds": actor_seconds,
            "ray_load_seconds": load_seconds,
            "first_shard_s": stored_at[0], "last_shard_s": stored_at[-1], "max_per_token_diff": per_token}, indent=1))


if __name__ == "__main__":
    main()
