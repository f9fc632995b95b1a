"""Scoring speed and agreement against EleutherAI's lm-evaluation-harness, side by side.

Run: `make bench`, or `.venv/bin/python benchmarks/bench_vs_lmeval.py [--model smollm2-135m]
[--items 120] [--batch-size 16] [--dtypes float32,bfloat16] [--pack on|off|both] [--rounds 1]
[--json out.json]`. Needs the `bench` extra, lm-eval pinned: `pip install -e '.[bench]'`.

What is compared, in one process, on the same loaded model and batch size:
- `biasaudit.lm.scoring.score` on N item versions (three options each: 3N context/continuation pairs);
- lm-eval's `HFLM.loglikelihood` on the same 3N pairs (continuation = the joining space and the
  option), with `add_bos_token=True` (a start token before every context, as `score()` puts one);
  a pair lm-eval cannot score (its continuation tokens come out empty because the option merges
  into the context's last token) is left out of its requests and counted.
Per precision, the runs are interleaved A B B A (A B C C B A with `--pack both`), so that a
machine slowing down or speeding up during the benchmark does not enter the ratio; each side's
time is the median of its runs.

Tokens forwarded: a forward pre-hook on the model adds up the size of every input tensor (padded
tokens, batch rows, forward calls); unpadded tokens are counted from what each side builds
(`score()`'s sequences; lm-eval's distinct context+continuation[:-1] inputs).

Agreement: the log-prob of each pair from both, where both score the same tokens after the same
prefix (then they should be equal up to float rounding), and the pairs where they do not: the
continuation's first token straddles the context's last characters (`score()` scores that token
with the continuation; lm-eval's split of the joint tokens cannot), or the prefix differs. A run
of lm-eval as it comes (no start token before a non-empty context) shows the effect of the
missing start token. With two precisions, `score()` in bf16 against fp32: max |delta log-prob|,
max |delta soft score| (per-token means, the study's aggregate) and preference flips.

`--device cuda` adds peak GPU memory per side (`torch.cuda.max_memory_allocated`); see
benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from biasaudit.analyses.scores import item_scores
from biasaudit.core.options import DEFAULT_SEED
from biasaudit.data.item_table import OPTIONS, join_text, read_items
from biasaudit.lm.registry import cpu_has_native_bf16, load_model, resolve_model_path
from biasaudit.lm.scoring import score
from biasaudit.lm.tokens import build_sequences, encode_joint

LMEVAL_MISSING = ("lm-eval is not installed: this benchmark needs the project's `bench` extra "
                  "(`.venv/bin/pip install -e '.[bench]'`, or `make bench`, which installs it).")


def lmeval_available() -> bool:
    try:
        import lm_eval.models.huggingface  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------------------------------------
# The pairs both sides score
# ------------------------------------------------------------------------------------------------

def item_pairs(items: pd.DataFrame) -> pd.DataFrame:
    """One row per item version and option: row, option, context, option_text, language, and
    continuation = what lm-eval gets (the joining space, where the script uses one, and the option)."""
    rows = []
    for row, item in enumerate(items.itertuples(index=False)):
        for option in OPTIONS:
            text = getattr(item, option)
            joined = join_text(item.context, text, item.language)
            rows.append({"row": row, "item_id": item.item_id, "option": option, "context": item.context,
                         "option_text": text,
                         "language": item.language, "continuation": joined[len(item.context):]})
    return pd.DataFrame(rows)


def straddles_boundary(tokenizer, context: str, continuation: str) -> bool:
    """Whether a token of context + continuation covers characters on both sides of the boundary
    (the option merges into the context's last token)."""
    if not context:
        return False
    encoding = tokenizer(context + continuation, return_offsets_mapping=True, add_special_tokens=False)
    boundary = len(context)
    return any(start < boundary < end for start, end in encoding["offset_mapping"])


def our_tokens(tokenizer, pairs: pd.DataFrame) -> list[tuple[list[int], list[int]]]:
    """(ids, scored positions) of every pair, as `score()` tokenizes it."""
    return [encode_joint(tokenizer, p.context, p.option_text, p.language) for p in pairs.itertuples(index=False)]


def pair_values(pairs: pd.DataFrame, column: str, scores: pd.DataFrame) -> np.ndarray:
    """A scores table's `column` (e.g. "lp_sum") for every pair, in the order of `pairs`."""
    by_item = scores.set_index("item_id")
    return np.array([by_item.at[p.item_id, f"{column}_{p.option}"] for p in pairs.itertuples(index=False)],
                    dtype=float)


# ------------------------------------------------------------------------------------------------
# Counting what the model is asked to do
# ------------------------------------------------------------------------------------------------

@dataclass
class ForwardCounter:
    """Forward calls, batch rows and input tokens (padding included) seen by a model's forward."""

    calls: int = 0
    rows: int = 0
    padded_tokens: int = 0
    _hook: object = field(default=None, repr=False)

    def attach(self, network: torch.nn.Module) -> "ForwardCounter":
        def count(module, args, kwargs):
            input_ids = kwargs.get("input_ids", args[0] if args else None)
            self.calls += 1
            self.rows += int(input_ids.shape[0])
            self.padded_tokens += int(input_ids.numel())

        self._hook = network.register_forward_pre_hook(count, with_kwargs=True)
        return self

    def detach(self) -> None:
        self._hook.remove()


def score_unpadded_tokens(items: pd.DataFrame, network, tokenizer, pack: bool) -> tuple[int, int]:
    """(tokens, sequences) `score()` forwards (packing included), before padding."""
    window = getattr(network.config, "sliding_window", None) if pack else None
    sequences = build_sequences(items, tokenizer, pack=pack, max_packed_length=window)
    return sum(len(s.ids) for s in sequences), len(sequences)


def lmeval_unpadded_tokens(encodings: list[tuple[list[int], list[int]]]) -> tuple[int, int]:
    """(tokens, sequences) lm-eval forwards, before padding: one input context + continuation[:-1]
    per distinct such input (its logits cache scores requests that share one from one row)."""
    inputs = {tuple(context + continuation[:-1]) for context, continuation in encodings}
    return sum(len(i) for i in inputs), len(inputs)


# ------------------------------------------------------------------------------------------------
# lm-eval
# ------------------------------------------------------------------------------------------------

def make_lm(network, model: str, batch_size: int, add_bos_token: bool | None):
    """lm-eval's HFLM around the already loaded network; its tokenizer is loaded by lm-eval itself from
    the model's folder, as `--model_args pretrained=...,add_bos_token=True` would."""
    from lm_eval.models.huggingface import HFLM

    logging.getLogger("lm-eval").setLevel(logging.ERROR)
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    return HFLM(pretrained=network, tokenizer=resolve_model_path(model), batch_size=batch_size,
                add_bos_token=add_bos_token, device=str(next(network.parameters()).device))


def requests(pairs: pd.DataFrame) -> list:
    from lm_eval.api.instance import Instance

    return [Instance(request_type="loglikelihood", doc={}, arguments=(p.context, p.continuation), idx=k)
            for k, p in enumerate(pairs.itertuples(index=False))]


def lmeval_encodings(lm, instances: list) -> list[tuple[list[int], list[int]]]:
    """(context tokens, continuation tokens) lm-eval makes of each request, by its own `loglikelihood`
    with the model call replaced by a recorder (nothing is forwarded)."""
    recorded: list[tuple[list[int], list[int]]] = []

    def record(new_requests, disable_tqdm=False, override_bs=None):
        recorded.extend((list(context), list(continuation)) for _, context, continuation in new_requests)
        return [(0.0, False)] * len(new_requests)

    lm._loglikelihood_tokens = record
    try:
        lm.loglikelihood(instances, disable_tqdm=True)
    finally:
        del lm._loglikelihood_tokens
    return recorded


@dataclass
class Screen:
    """Which pairs lm-eval can score, and which of those it scores exactly as `score()` does."""

    scorable: np.ndarray      # its continuation has tokens (else its loglikelihood fails on the pair)
    same_tokens: np.ndarray   # same prefix, same scored tokens as score()
    straddling: np.ndarray    # the option's first token merges with the context's last characters
    encodings: list


def screen(lm, tokenizer, pairs: pd.DataFrame, ours: list) -> Screen:
    encodings = lmeval_encodings(lm, requests(pairs))
    scorable = np.array([len(cont) > 0 for _, cont in encodings])
    same = np.array([context + cont == ids and positions == list(range(len(context), len(ids)))
                     for (context, cont), (ids, positions) in zip(encodings, ours)])
    straddling = np.array([straddles_boundary(tokenizer, p.context, p.continuation)
                           for p in pairs.itertuples(index=False)])
    return Screen(scorable, same & scorable, straddling, encodings)


# ------------------------------------------------------------------------------------------------
# Timed runs
# ------------------------------------------------------------------------------------------------

@dataclass
class Side:
    label: str
    run: object               # () -> result
    pairs: int
    seconds: list = field(default_factory=list)
    load: list = field(default_factory=list)  # the 1-minute load average when each run started
    peak_bytes: int = 0
    result: object = None
    counted: ForwardCounter | None = None  # what the model saw in the side's first timed run

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def timed(side: Side, device: str, network: torch.nn.Module) -> None:
    """One run of a side; its first run also counts the model's inputs (a hook: one call per forward)."""
    counter = ForwardCounter().attach(network) if side.counted is None else None
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    try:
        side.load.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
        started = time.perf_counter()
        side.result = side.run()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            side.peak_bytes = max(side.peak_bytes, torch.cuda.max_memory_allocated())
        side.seconds.append(time.perf_counter() - started)
    finally:
        if counter is not None:
            counter.detach()
            side.counted = counter


def interleaved(sides: list[Side], rounds: int, device: str, network: torch.nn.Module) -> None:
    """A B ... B A, `rounds` times: every side runs 2 * rounds times, symmetric in time."""
    for _ in range(rounds):
        for side in [*sides, *reversed(sides)]:
            timed(side, device, network)


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"date": datetime.datetime.now().isoformat(timespec="minutes"), "cpu": cpu,
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    try:
        import lm_eval
        import transformers

        info["lm_eval"] = lm_eval.__version__
        info["transformers"] = transformers.__version__
    except (ImportError, AttributeError):
        pass
    return info


# ------------------------------------------------------------------------------------------------
# One precision
# ------------------------------------------------------------------------------------------------

def bench_dtype(args, items: pd.DataFrame, pairs: pd.DataFrame, dtype: str, out: dict) -> pd.DataFrame:
    """Time score() and lm-eval in `dtype`; fill `out[dtype]`; return score()'s table (packed if run)."""
    device = args.device
    network, tokenizer = load_model(args.model, device=device, dtype=getattr(torch, dtype))
    pair = (network, tokenizer)
    ours = our_tokens(tokenizer, pairs)
    lm = make_lm(network, args.model, args.batch_size, add_bos_token=True)
    checked = screen(lm, tokenizer, pairs, ours)
    instances = [r for r, keep in zip(requests(pairs), checked.scorable) if keep]

    packs = {"on": [True], "off": [False], "both": [True, False]}[args.pack]
    sides = [Side(f"score() {'packed' if p else 'unpacked'}",
                  (lambda p=p: score(items, pair, model_name=args.model, batch_size=args.batch_size, pack=p,
                                     progress=False)), len(pairs)) for p in packs]
    sides.append(Side("lm-eval add_bos_token=True", lambda: lm.loglikelihood(instances, disable_tqdm=True),
                      len(instances)))

    # warm-up (first calls allocate memory and pick kernels), then the timed runs
    score(items.head(4), pair, model_name=args.model, batch_size=args.batch_size, progress=False)
    lm.loglikelihood(instances[:8], disable_tqdm=True)
    interleaved(sides, args.rounds, device, network)
    counts = {}
    for side, pack in zip(sides, [*packs, None]):
        if pack is None:
            unpadded, sequences = lmeval_unpadded_tokens([e for e, keep in zip(checked.encodings, checked.scorable)
                                                          if keep])
        else:
            unpadded, sequences = score_unpadded_tokens(items, network, tokenizer, pack)
        counts[side.label] = {"calls": side.counted.calls, "rows": side.counted.rows,
                              "padded_tokens": side.counted.padded_tokens, "tokens": unpadded,
                              "sequences": sequences}

    result = {"sides": {}, "pairs": len(pairs), "items": len(items)}
    lmeval_side = sides[-1]
    for side in sides:
        entry = {"pairs": side.pairs, "seconds": side.seconds, "load": side.load, "median_s": side.median,
                 "pairs_per_s": side.pairs / side.median, **counts[side.label],
                 "tokens_per_s": counts[side.label]["tokens"] / side.median}
        if device.startswith("cuda"):
            entry["peak_gib"] = side.peak_bytes / 2**30
        result["sides"][side.label] = entry
    for side in sides[:-1]:
        result["sides"][side.label]["ratio_vs_lmeval"] = (side.pairs / side.median) / (lmeval_side.pairs /
                                                                                        lmeval_side.median)

    # agreement with lm-eval (add_bos_token=True) on the pairs both score the same way
    ours_table = sides[0].result
    lp_ours = pair_values(pairs, "lp_sum", ours_table)
    lp_lmeval = np.full(len(pairs), np.nan)
    lp_lmeval[checked.scorable] = [lp for lp, _ in lmeval_side.result]
    same = checked.same_tokens
    result["agreement_bos"] = {
        "same_tokens": int(same.sum()), "unscorable_by_lmeval": int((~checked.scorable).sum()),
        "straddling_boundary": int(checked.straddling.sum()),
        "straddling_scored_differently": int((checked.straddling & ~same).sum()),
        "other_differences": int((~same & ~checked.straddling).sum()),
        "max_abs_delta_same_tokens": float(np.max(np.abs(lp_ours[same] - lp_lmeval[same]))) if same.any() else None,
        "max_rel_delta_same_tokens": (float(np.max(np.abs(lp_ours[same] - lp_lmeval[same]) / np.abs(lp_ours[same])))
                                      if same.any() else None),
        "max_abs_delta_other": (float(np.nanmax(np.abs(lp_ours[~same] - lp_lmeval[~same])))
                                if (~same & checked.scorable).any() else None),
    }
    if args.default_bos and dtype == args.dtypes[0]:
        result["agreement_default"] = default_bos_agreement(args, network, tokenizer, pairs, ours, lp_ours, device)
    if args.exact_items and dtype == args.dtypes[0]:
        result["agreement_one_by_one"] = one_by_one_agreement(args, network, tokenizer, items.head(args.exact_items))
    out[dtype] = result
    del lm, network
    return ours_table


def default_bos_agreement(args, network, tokenizer, pairs, ours, lp_ours, device) -> dict:
    """lm-eval as it comes (add_bos_token unset): one timed run, and how its log-probs differ."""
    lm = make_lm(network, args.model, args.batch_size, add_bos_token=None)
    checked = screen(lm, tokenizer, pairs, ours)
    instances = [r for r, keep in zip(requests(pairs), checked.scorable) if keep]
    side = Side("lm-eval default", lambda: lm.loglikelihood(instances, disable_tqdm=True), len(instances))
    timed(side, device, network)
    lp = np.full(len(pairs), np.nan)
    lp[checked.scorable] = [value for value, _ in side.result]
    # the preference between the two contrasting options as each side has it: by summed log-prob, and by
    # per-token mean (the study's aggregate; each side divides by the number of tokens it scored)
    ntok_ours = np.array([len(positions) for _, positions in ours], dtype=float)
    ntok_lmeval = np.array([len(cont) for _, cont in checked.encodings], dtype=float)
    flips = {}
    for aggregate, mine, theirs in (("sum", lp_ours, lp), ("mean", lp_ours / ntok_ours, lp / ntok_lmeval)):
        wide = pairs.assign(ours=mine, lmeval=theirs).pivot(index="row", columns="option", values=["ours", "lmeval"])
        both = wide.dropna()
        flips[aggregate] = int(((both["ours", "stereotyped"] > both["ours", "anti_stereotyped"])
                                != (both["lmeval", "stereotyped"] > both["lmeval", "anti_stereotyped"])).sum())
    same = checked.same_tokens
    return {"seconds": side.seconds[0], "pairs_per_s": side.pairs / side.seconds[0],
            "same_tokens": int(same.sum()), "unscorable_by_lmeval": int((~checked.scorable).sum()),
            "max_abs_delta_same_tokens": float(np.max(np.abs(lp_ours[same] - lp[same]))) if same.any() else None,
            "max_abs_delta_all": float(np.nanmax(np.abs(lp_ours - lp))),
            "preference_flips": flips["sum"], "preference_flips_mean": flips["mean"], "items_compared": len(both)}


def one_by_one_agreement(args, network, tokenizer, items: pd.DataFrame) -> dict:
    """Both sides one sequence per forward pass (score() unpacked, batch 1; lm-eval batch 1, with a start
    token): what is left of their difference is the arithmetic, not batching, padding or masks."""
    pairs = item_pairs(items)
    ours = our_tokens(tokenizer, pairs)
    lm = make_lm(network, args.model, 1, add_bos_token=True)
    checked = screen(lm, tokenizer, pairs, ours)
    same = checked.same_tokens
    theirs = lm.loglikelihood([r for r, keep in zip(requests(pairs), same) if keep], disable_tqdm=True)
    table = score(items, (network, tokenizer), model_name=args.model, batch_size=1, pack=False, progress=False)
    mine = pair_values(pairs, "lp_sum", table)[same]
    delta = np.abs(mine - np.array([lp for lp, _ in theirs]))
    return {"pairs": len(pairs), "same_tokens": int(same.sum()),
            "max_abs_delta": float(delta.max()) if len(delta) else None,
            "max_rel_delta": float((delta / np.abs(mine)).max()) if len(delta) else None,
            "exactly_equal": int((delta == 0).sum())}


def precision_agreement(reference: pd.DataFrame, other: pd.DataFrame) -> dict:
    """score() in another precision against the first: log-probs, soft scores (per-token means), flips."""
    other = other.set_index("item_id").loc[reference["item_id"]].reset_index()
    a, b = item_scores(reference, "mean"), item_scores(other, "mean")
    lp = max(float(np.max(np.abs(reference[f"lp_sum_{o}"].to_numpy() - other[f"lp_sum_{o}"].to_numpy())))
             for o in OPTIONS)
    return {"max_abs_delta_lp_sum": lp, "max_abs_delta_soft": float(np.max(np.abs(a["soft"] - b["soft"]))),
            "binary_flips": int((a["binary"] != b["binary"]).sum()), "items": len(a)}


def report(results: dict) -> str:
    m = results["machine"]
    lines = [", ".join(f"{key} {value}" for key, value in m.items()),
             f"model {results['model']}, {results['items']} item versions = {results['pairs']} pairs, "
             f"batch {results['batch_size']}, device {results['device']}"]
    for dtype in results["dtypes"]:
        result = results[dtype]
        lines.append(f"\n[{dtype}]  runs (seconds @ 1-min load average): " + "; ".join(
            f"{label}: " + " ".join(f"{t:.1f}@{l:.1f}" for t, l in zip(side["seconds"], side["load"]))
            for label, side in result["sides"].items()))
        lines.append(f"{'side':>28} {'median s':>9} {'pairs/s':>8} {'ratio':>6} {'tokens':>8} {'padded':>8} "
                     f"{'rows':>6} {'calls':>6} {'tok/s':>7}" + (f" {'peak GiB':>8}" if results["device"] != "cpu"
                                                                     else ""))
        for label, side in result["sides"].items():
            ratio = f"{side['ratio_vs_lmeval']:.2f}x" if "ratio_vs_lmeval" in side else "1"
            line = (f"{label:>28} {side['median_s']:9.2f} {side['pairs_per_s']:8.2f} {ratio:>6} {side['tokens']:8d} "
                    f"{side['padded_tokens']:8d} {side['rows']:6d} {side['calls']:6d} {side['tokens_per_s']:7.0f}")
            if "peak_gib" in side:
                line += f" {side['peak_gib']:8.2f}"
            lines.append(line)
        a = result["agreement_bos"]
        lines.append(f"agreement with lm-eval (add_bos_token=True): {a['same_tokens']} of {result['pairs']} pairs "
                     f"score the same tokens, max |delta log-prob| {a['max_abs_delta_same_tokens']:.3g} (relative "
                     f"{a['max_rel_delta_same_tokens']:.2g}); "
                     f"{a['straddling_boundary']} pairs have a token straddling the context/option boundary "
                     f"({a['straddling_scored_differently']} scored differently by lm-eval, "
                     f"{a['unscorable_by_lmeval']} not scorable at all); {a['other_differences']} other differences")
        if "agreement_one_by_one" in result:
            e = result["agreement_one_by_one"]
            lines.append(f"one sequence per forward on both sides ({e['pairs']} pairs, {e['same_tokens']} with the "
                         f"same tokens): max |delta log-prob| {e['max_abs_delta']:.3g} (relative {e['max_rel_delta']:.2g}), "
                         f"{e['exactly_equal']} bit-identical")
        if "agreement_default" in result:
            d = result["agreement_default"]
            lines.append(f"lm-eval as it comes (no start token): {d['pairs_per_s']:.2f} pairs/s (one run); "
                         f"{d['same_tokens']} pairs score the same tokens; max |delta log-prob| "
                         f"{d['max_abs_delta_all']:.3f}; stereotyped-vs-anti preference differs on "
                         f"{d['preference_flips']} (summed log-probs) / {d['preference_flips_mean']} (per-token means) "
                         f"of {d['items_compared']} item versions")
    if "precision" in results:
        p = results["precision"]
        lines.append(f"\nscore() {results['dtypes'][1]} vs {results['dtypes'][0]}: max |delta log-prob sum| "
                     f"{p['max_abs_delta_lp_sum']:.4f}, max |delta soft| {p['max_abs_delta_soft']:.4f}, "
                     f"binary flips {p['binary_flips']} of {p['items']}; speed-up "
                     f"{p['speedup']:.2f}x (packed medians)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=120, help="item versions (3 pairs each)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dtypes", help="comma-separated, the first is the reference (default: float32,bfloat16 "
                                         "on a CPU with native bf16 or a GPU, else float32)")
    parser.add_argument("--pack", choices=["on", "off", "both"], default="on", help="score()'s packing")
    parser.add_argument("--rounds", type=int, default=1, help="A B B A rounds (each side runs 2 x rounds)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-default-bos", dest="default_bos", action="store_false",
                        help="skip the run of lm-eval without a start token")
    parser.add_argument("--exact-items", type=int, default=20,
                        help="item versions also scored one sequence per forward by both (0: skip)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.dtypes is None:
        args.dtypes = "float32,bfloat16" if cpu_has_native_bf16() or args.device.startswith("cuda") else "float32"
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not lmeval_available():
        print(LMEVAL_MISSING, file=sys.stderr)
        return 2

    bank = read_items()
    items = bank.sample(n=min(args.items, len(bank)), random_state=args.seed).reset_index(drop=True)
    pairs = item_pairs(items)
    results = {"machine": machine(), "model": args.model, "items": len(items), "pairs": len(pairs),
               "batch_size": args.batch_size, "device": args.device, "dtypes": args.dtypes}
    tables = {dtype: bench_dtype(args, items, pairs, dtype, results) for dtype in args.dtypes}
    if len(args.dtypes) > 1:
        first, second = args.dtypes[:2]
        label = next(iter(results[first]["sides"]))
        results["precision"] = {**precision_agreement(tables[first], tables[second]),
                                "speedup": results[first]["sides"][label]["median_s"]
                                / results[second]["sides"][label]["median_s"]}
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
