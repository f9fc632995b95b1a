"""What scoring the paper's full item set costs: a timed, seeded sample of its item versions scored with each
offline model in fp32 and bf16 on this machine, extrapolated to every version the release scores.

Run: `.venv/bin/python benchmarks/bench_paper_items.py [--released FOLDER] [--sample 120] [--json out.json]`
(a few minutes on two CPU cores). The paper's items come from its prompts.json (`data.release_items.paper_bank`:
the download cache, $BIASAUDIT_DATA_DIR/released, or --released); the full set is the versions the release
scores for one model (its 362 originals, 2,497 translations and the English rewordings: 3,925 for
Llama-3.1-8B), three continuations each. The sample is drawn from the bank's versions (the rewordings' texts,
where their file is absent, are not in it; they are as long as the originals). Each configuration scores a few
versions first, untimed, so that loading and the first call's set-up are not counted.

`--gpu-pairs-per-second` turns a GPU throughput that `benchmarks/gpu_check.sh` measured (its `score()` pairs/s
for a 7-8B model in bf16) into the same estimate for the GPU; without it no GPU line is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from biasaudit.data.release_items import paper_bank, paper_bank_folder
from biasaudit.data.released import load_released, released_models_in
from biasaudit.lm.registry import cpu_has_native_bf16, load_model
from biasaudit.lm.scoring import score

MODELS = ("smollm2-135m", "gemma3-270m")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
WARM_UP = 4


def full_set_versions(folder: Path) -> int:
    """The versions the release scores for one model (originals, translations, rewordings), else the bank's."""
    models = released_models_in(folder)
    if models:
        return int(load_released(folder, models=models[:1]).scores["item_id"].nunique())
    return len(paper_bank(folder)[0])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--released", default="", help="a folder with the release's prompts.json and label_fix.json")
    parser.add_argument("--sample", type=int, default=120, help="item versions timed per configuration")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--gpu-pairs-per-second", type=float, default=0.0)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)

    torch.set_num_threads(torch.get_num_threads())
    folder = paper_bank_folder(args.released)
    bank, _, _ = paper_bank(folder)
    total = full_set_versions(folder)
    sample = bank.sample(n=min(args.sample + WARM_UP, len(bank)), random_state=args.seed).reset_index(drop=True)
    warm, timed = sample.head(WARM_UP), sample.iloc[WARM_UP:]
    rows = []
    for model in args.models.split(","):
        for name in args.dtypes.split(","):
            loaded = load_model(model, device="cpu", dtype=DTYPES[name])
            score(warm, loaded, model_name=model, batch_size=args.batch_size, progress=False)
            started = time.perf_counter()
            score(timed, loaded, model_name=model, batch_size=args.batch_size, progress=False)
            seconds = time.perf_counter() - started
            per_version = seconds / len(timed)
            rows.append({"model": model, "precision": name, "versions_timed": len(timed), "seconds": seconds,
                         "versions_per_s": 1 / per_version, "pairs_per_s": 3 / per_version,
                         "full_set_minutes": total * per_version / 60})
            print(f"{model} {name}: {len(timed)} versions in {seconds:.1f} s, {1 / per_version:.2f} versions/s; "
                  f"the full set ({total:,} versions) in about {total * per_version / 60:.0f} min", flush=True)
            del loaded
    table = pd.DataFrame(rows)
    result = {"full_set_versions": total, "folder": str(folder), "threads": torch.get_num_threads(),
              "native_bf16": cpu_has_native_bf16(), "rows": table.to_dict("records")}
    if args.gpu_pairs_per_second:
        result["gpu_full_set_minutes"] = 3 * total / args.gpu_pairs_per_second / 60
        print(f"GPU at {args.gpu_pairs_per_second:.0f} pairs/s: the full set in about "
              f"{result['gpu_full_set_minutes']:.1f} min per model", flush=True)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
