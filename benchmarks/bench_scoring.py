"""Scorer throughput against the naive one-sequence-at-a-time reference, on the same items.

Run: `.venv/bin/python benchmarks/bench_scoring.py [--model smollm2-135m] [--items 60]`.
Prints item versions per second for each and the ratio (the issue's target: at least 5x with
SmolLM2 on a 2-core CPU). Both sides score identical items with the same loaded model, and
the script checks they agree before printing any ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from biasaudit.core.options import DEFAULT_SEED
from biasaudit.data.item_table import read_items
from biasaudit.lm.reference import naive_scores
from biasaudit.lm.registry import load_model
from biasaudit.lm.scoring import score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=60, help="item versions scored by both")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args()

    bank = read_items()
    items = bank.sample(n=min(args.items, len(bank)), random_state=args.seed).reset_index(drop=True)
    model, tokenizer = load_model(args.model, device="cpu")
    print(f"model {args.model}, {len(items)} item versions (3 options each), torch threads {torch.get_num_threads()}")

    score(items.head(4), (model, tokenizer), model_name=args.model, progress=False)  # warm-up
    timings = {}
    started = time.perf_counter()
    naive = naive_scores(model, tokenizer, items)
    timings["naive"] = time.perf_counter() - started
    for label, pack in (("batched", False), ("batched+packed", True)):
        started = time.perf_counter()
        fast = score(items, (model, tokenizer), model_name=args.model, batch_size=args.batch_size, pack=pack,
                     progress=False)
        timings[label] = time.perf_counter() - started
        worst = max(np.abs(fast[f"lp_sum_{o}"] - naive[f"lp_sum_{o}"]).max()
                    for o in ("stereotyped", "anti_stereotyped", "third"))
        assert worst < 1e-3, f"{label} disagrees with the naive reference by {worst}"
    for label, seconds in timings.items():
        ratio = timings["naive"] / seconds
        print(f"{label:>16}: {seconds:7.2f} s  {len(items) / seconds:6.1f} item versions/s  ratio {ratio:4.1f}x")


if __name__ == "__main__":
    main()
