"""Check the paper's release on a GPU: score one of its ten models again on its own items and report how far
the per-token mean log-probs are from the released ones, per language (`data.release_check`).

Run (one command; a GPU with the model in the local Hugging Face cache, the release in the download cache or
a folder):

    .venv/bin/python benchmarks/release_check.py --model meta-llama/Llama-3.1-8B-Instruct --released-model llama3.1-8b

or `benchmarks/gpu_check.sh --release`. The scores are stored as a run (runs/<run-name>/, resumable: a killed
check goes on where it stopped). The release's models ran quantized to 4 bits (its
summary.json reports a 4-bit rerun); this scores in --dtype (bf16 on a GPU by default), so small differences
are expected and say nothing by themselves; a preference
that disagrees on many versions, or a language far off the others, does. Which checkpoint the paper's
"llama3.1-8b" is (base or instruct) the release does not say: try both. Its CPU path is tested with the tiny
random model on a made-up release (tests/test_release_check.py); its numbers mean nothing there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from biasaudit.data.release_check import release_agreement
from biasaudit.data.release_files import resolve_released_source
from biasaudit.data.release_items import paper_bank
from biasaudit.data.released import load_released
from biasaudit.run.engine import EngineSpec
from biasaudit.run.pipeline import score_run


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="what to score: a Hugging Face id, a local folder, an offline short name")
    parser.add_argument("--released-model", default="llama3.1-8b", help="the release's name of the same model")
    parser.add_argument("--released", default="download", help='a folder of released files, or "download" (the cache)')
    parser.add_argument("--sample", type=int, default=0, help="base items drawn with --seed; 0: all 362")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--device", default=None, help="cuda or cpu; default: CUDA when there is one")
    parser.add_argument("--dtype", default="auto", help="float32, bfloat16, float16, or auto (bf16 on CUDA)")
    parser.add_argument("--batch-size", default="16", help='sequences per forward pass, or "auto"')
    parser.add_argument("--run-name", default="release_check", help="the run under runs/ that stores the scores")
    parser.add_argument("--json", default="", help="write the table and the settings here")
    args = parser.parse_args(argv)

    folder = resolve_released_source(args.released, [args.released_model] if args.released == "download" else None)
    items, _, _ = paper_bank(folder, sample=args.sample, seed=args.seed)
    released = load_released(folder, models=[args.released_model]).scores
    batch = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    started = time.perf_counter()
    scored, timings = score_run(args.run_name, items, models=[args.model],
                                spec=EngineSpec(dtype=args.dtype, device=args.device, batch_size=batch))
    seconds = time.perf_counter() - started
    table = release_agreement(scored, released)
    print(f"{args.model} scored here against the release's {args.released_model}: {len(items)} item versions "
          f"({int(timings['scored_now'].sum())} scored now, {seconds:.0f} s)")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    result = {"model": args.model, "released_model": args.released_model, "released": str(folder),
              "dtype": args.dtype, "device": args.device, "versions": len(items), "seconds": seconds,
              "agreement": table.to_dict("records")}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
