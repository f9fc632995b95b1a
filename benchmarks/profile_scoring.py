"""Where the time of `biasaudit.lm.scoring.score` goes: tokenization, masks, the forward pass, the rest.

Run: `.venv/bin/python benchmarks/profile_scoring.py [--model smollm2-135m] [--items 120]
[--dtype float32|bfloat16] [--batch-size 16] [--no-pack]`.

The scorer's own steps are timed where they run (its module functions are wrapped by timers,
and forward hooks on the model time every forward pass), so the breakdown adds up to the
wall time of one `score()` call:

- tokenize + pack: `build_sequences` (the fast tokenizer with offsets, and packing);
- masks: `_attention_mask` (the padding mask, or the 4D mask of packed sequences);
- forward: the model's forward passes (from its pre-hook to its hook);
- log-softmax + gather: the rest of `_score_batch` (input tensors, fp32 log-softmax of the kept
  logits, reading the target tokens);
- table + checks: everything else (items contract check, sorting, batching, the scores table).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from contextlib import contextmanager

import torch
from biasaudit.core.options import DEFAULT_SEED
from biasaudit.data.item_table import read_items
from biasaudit.lm import scoring
from biasaudit.lm.registry import load_model


class StepTimer:
    """Seconds spent in wrapped functions and in a model's forward passes."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._forward_started: float | None = None

    def wrap(self, label: str, function):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started
        return timed

    @contextmanager
    def installed(self, network: torch.nn.Module):
        originals = {name: getattr(scoring, name) for name in ("build_sequences", "_attention_mask", "_score_batch")}
        labels = {"build_sequences": "tokenize + pack", "_attention_mask": "masks", "_score_batch": "batches"}
        for name, function in originals.items():
            setattr(scoring, name, self.wrap(labels[name], function))

        def before(module, args, kwargs):
            self._forward_started = time.perf_counter()

        def after(module, args, kwargs, output):
            self.seconds["forward"] += time.perf_counter() - self._forward_started

        hooks = [network.register_forward_pre_hook(before, with_kwargs=True),
                 network.register_forward_hook(after, with_kwargs=True)]
        try:
            yield self
        finally:
            for name, function in originals.items():
                setattr(scoring, name, function)
            for hook in hooks:
                hook.remove()


def breakdown(seconds: dict[str, float], total: float) -> dict[str, float]:
    """The timed steps as disjoint parts of `total`: masks and forward are inside the batches."""
    batches = seconds.get("batches", 0.0)
    parts = {
        "tokenize + pack": seconds.get("tokenize + pack", 0.0),
        "masks": seconds.get("masks", 0.0),
        "forward": seconds.get("forward", 0.0),
        "log-softmax + gather": batches - seconds.get("masks", 0.0) - seconds.get("forward", 0.0),
    }
    parts["table + checks"] = total - parts["tokenize + pack"] - batches
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=120, help="item versions (3 options each)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--no-pack", action="store_true")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args()

    bank = read_items()
    items = bank.sample(n=min(args.items, len(bank)), random_state=args.seed).reset_index(drop=True)
    network, tokenizer = load_model(args.model, device="cpu", dtype=getattr(torch, args.dtype))
    pair = (network, tokenizer)
    scoring.score(items.head(8), pair, model_name=args.model, progress=False)  # warm-up
    timer = StepTimer()
    with timer.installed(network):
        started = time.perf_counter()
        scoring.score(items, pair, model_name=args.model, batch_size=args.batch_size, pack=not args.no_pack,
                      progress=False)
        total = time.perf_counter() - started
    print(f"model {args.model} ({args.dtype}), {len(items)} item versions, batch {args.batch_size}, "
          f"{'unpacked' if args.no_pack else 'packed'}, torch threads {torch.get_num_threads()}: {total:.1f} s")
    for label, seconds in breakdown(timer.seconds, total).items():
        print(f"  {label:>22}: {seconds:7.2f} s  {100 * seconds / total:5.1f}%")


if __name__ == "__main__":
    main()
