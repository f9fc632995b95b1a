"""Scoring item versions with a causal language model: log-probability of each continuation.

For every item version and option (stereotyped, anti-stereotyped, third) the model reads the
context followed by the option, and we sum the log-probabilities of the option's tokens.

How continuation tokens are found (the part pipelines most often get wrong): context and
continuation are tokenized *together*, and a token belongs to the continuation when it covers
any character after the end of the context (the joining space included). So a token that
merges the last context characters with the first continuation characters is scored with the
continuation, and the continuation's first token is always scored. When the tokenizer adds no
start token (SmolLM2's adds none), BOS (else EOS) is put in front, so that even a sentence
with an empty context has its first token predicted from something."""

from __future__ import annotations

import inspect
import time
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator, Literal

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from biasaudit.core.store import (
    DTYPE_COLUMN,
    ScoreStore,
    run_lock,
    scores_for_items,
    stored_scores,
)
from biasaudit.data.item_table import ITEM_COLUMNS, validate_items
from biasaudit.lm.engines import scores_frame
from biasaudit.lm.registry import cpu_has_native_bf16, load_model
from biasaudit.lm.tokens import (
    Sequence,
    boundary_sequences,
    build_sequences,
    longest_first,
)

# batch_size="auto": at most this many sequences per batch, and on a CPU about this many tokens.
AUTO_MAX_BATCH = 64
AUTO_CPU_TOKENS = 2048


def _accepts_logits_to_keep(network: PreTrainedModel) -> bool:
    return "logits_to_keep" in inspect.signature(network.forward).parameters


def _attention_mask(batch: list[Sequence], length: int, dtype: torch.dtype) -> torch.Tensor:
    """2D padding mask for plain sequences; a 4D additive mask when any sequence is packed."""
    if not any(s.packed for s in batch):
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for b, sequence in enumerate(batch):
            mask[b, : len(sequence.ids)] = 1
        return mask
    allowed = torch.zeros((len(batch), 1, length, length), dtype=torch.bool)
    causal = torch.ones((length, length), dtype=torch.bool).tril()
    for b, sequence in enumerate(batch):
        n = len(sequence.ids)
        segment = torch.tensor(sequence.segments)
        same_or_prefix = (segment[None, :] == -1) | (segment[None, :] == segment[:, None])
        allowed[b, 0, :n, :n] = causal[:n, :n] & same_or_prefix
        # padding rows attend to themselves only, so no row is all -inf (NaN would spread)
        allowed[b, 0, n:, n:] = torch.eye(length - n, dtype=torch.bool)
    additive = torch.zeros(allowed.shape, dtype=dtype)
    additive.masked_fill_(~allowed, torch.finfo(dtype).min)
    return additive


@torch.inference_mode()
def _score_batch(network: PreTrainedModel, batch: list[Sequence], device: str) -> list[tuple[int, str, float]]:
    """(row, option, log-prob) of every target token of the batch, in one padded forward pass."""
    targets = [(b, *t) for b, s in enumerate(batch) for t in s.targets]
    if not targets:
        return []
    length = max(len(s.ids) for s in batch)
    input_ids = torch.zeros((len(batch), length), dtype=torch.long)
    position_ids = torch.zeros((len(batch), length), dtype=torch.long)
    for b, sequence in enumerate(batch):
        input_ids[b, : len(sequence.ids)] = torch.tensor(sequence.ids)
        position_ids[b, : len(sequence.ids)] = torch.tensor(sequence.position_ids)
    mask = _attention_mask(batch, length, next(network.parameters()).dtype)
    # Only positions that predict a continuation token need logits; skipping the rest saves
    # most of the output-layer cost for models with large vocabularies (Gemma: 262k).
    first = min(t[3] for t in targets)
    kwargs = {"logits_to_keep": length - first} if _accepts_logits_to_keep(network) else {}
    offset = first if kwargs else 0
    rows = torch.tensor([t[0] for t in targets], device=device)
    cols = torch.tensor([t[3] - offset for t in targets], device=device)
    with _output_layer_reads(network, rows, cols) as gathered:
        logits = network(
            input_ids=input_ids.to(device), attention_mask=mask.to(device), position_ids=position_ids.to(device),
            use_cache=False, **kwargs,  # no key-value cache to fill: nothing is generated after this pass
        ).logits
    # padding positions are never picked
    picked = logits[0] if gathered else logits[rows.to(logits.device), cols.to(logits.device)]
    tokens = torch.tensor([t[4] for t in targets], device=picked.device)
    logprobs = target_logprobs(picked, tokens)
    return [(t[1], t[2], lp) for t, lp in zip(targets, logprobs.cpu().tolist())]


# How many logits the log-softmax converts to fp32 at a time: a few MB, which the allocator reuses
# from one slice to the next. Converting a whole batch at once (tens to hundreds of MB with a large
# vocabulary) takes fresh memory pages every batch; on a CPU that cost a fifth of bf16 scoring time
# (benchmarks/README.md, "bf16 on a CPU").
LOG_SOFTMAX_ELEMENTS = 2**19


def target_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log p(tokens[i]) under logits[i] ([targets, vocab], any precision), the log-softmax taken in fp32
    whatever the model's precision, a slice of rows at a time; float64 out."""
    rows = max(1, LOG_SOFTMAX_ELEMENTS // logits.shape[-1])
    parts = []
    for part, ids in zip(logits.split(rows), tokens.split(rows)):
        part = part.float()
        # gather − logsumexp rather than torch.log_softmax: on a CPU its fp32 kernel strays up to 2e-5
        # from a float64 log-softmax over a 262k vocabulary, logsumexp 3e-6
        parts.append(part.gather(1, ids[:, None]).squeeze(1) - torch.logsumexp(part, dim=-1))
    return torch.cat(parts).double()


# The output layer reads only the hidden states of target positions (see _output_layer_reads).
GATHER_TARGETS = True


@contextmanager
def _output_layer_reads(network: PreTrainedModel, rows: torch.Tensor, cols: torch.Tensor) -> Iterator[list[bool]]:
    """While active, the model's output layer gets only the hidden states at (rows[i], cols[i]), as
    one sequence of len(rows) positions, so the logits are [1, len(rows), vocab]: the output layer
    (a vocab × hidden matrix, the largest of a small model: Gemma's 262k rows) runs for the target
    tokens only, not for every kept position of every row, padding included. What a model does
    after its output layer (e.g. soft-capping) is elementwise and sees the same values.

    Yields a one-element list that is truthy once the output layer was called this way; a model
    whose forward does not go through `get_output_embeddings()` keeps its full logits."""
    called: list[bool] = []
    head = network.get_output_embeddings() if GATHER_TARGETS else None
    if not isinstance(head, torch.nn.Module):
        yield called
        return

    def gather(module, args):
        hidden = args[0]
        if called or hidden.dim() != 3:
            return None
        called.append(True)
        return (hidden[rows, cols].unsqueeze(0), *args[1:])

    handle = head.register_forward_pre_hook(gather)
    try:
        yield called
    finally:
        handle.remove()


def auto_batch_size(sequences: list[Sequence], device: str) -> int:
    """The batch size `batch_size="auto"` starts from: on a GPU the largest tried (out-of-memory
    halves it), on a CPU as many sequences as fit a token budget at the longest length."""
    if device.startswith("cuda"):
        return AUTO_MAX_BATCH
    longest = max((len(s.ids) for s in sequences), default=1)
    return int(np.clip(AUTO_CPU_TOKENS // max(longest, 1), 1, AUTO_MAX_BATCH))


# What one forward call costs beyond its tokens, in token slots: the per-call work (mask, rotary
# tables, layer dispatch) that makes many tiny batches slower than a few padded ones. Measured on
# a 2-core CPU with SmolLM2 and Gemma-3-270M (benchmarks/README.md, "Batches cut to pad least").
CALL_COST_TOKENS = 48


def length_batches(lengths: list[int], batch_size: int, call_cost: int | None = None) -> list[int]:
    """Sizes of consecutive batches over `lengths` (longest first) that forward the fewest token
    slots, padding included, plus `call_cost` per batch; none larger than `batch_size`.

    Cutting every `batch_size` sequences pads each batch to its first sequence's length; where
    lengths fall steeply (a small run, or the long tail of a bank) a fifth of the tokens forwarded
    were padding. An exact dynamic programme over the cut points, O(n x batch_size)."""
    call_cost = CALL_COST_TOKENS if call_cost is None else call_cost
    lengths = np.asarray(lengths, dtype=np.int64)
    if np.any(lengths[1:] > lengths[:-1]):
        raise ValueError("length_batches needs the lengths longest first")
    n = len(lengths)
    best = np.zeros(n + 1)
    cut = np.zeros(n + 1, dtype=np.int64)
    for end in range(1, n + 1):
        starts = np.arange(max(0, end - batch_size), end)
        costs = best[starts] + (end - starts) * lengths[starts] + call_cost
        k = int(np.argmin(costs))
        best[end], cut[end] = costs[k], starts[k]
    sizes = []
    end = n
    while end > 0:
        sizes.append(end - int(cut[end]))
        end = int(cut[end])
    return sizes[::-1]


def _free_memory(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _score_sequences(
    network: PreTrainedModel,
    sequences: list[Sequence],
    *,
    batch_size: int,
    device: str,
    progress: tqdm | None = None,
) -> tuple[dict[tuple[int, str], tuple[float, int]], int]:
    """Summed log-prob and token count per (row, option), and the batch size that worked; batches
    are formed by length and cut where they pad least (`length_batches`).

    On CUDA out-of-memory the batch is halved and retried (down to one sequence): a long run is
    never lost to one batch too large. An option with no scored token (only under the boundary
    error) is absent from the result.
    """
    results: dict[tuple[int, str], tuple[float, int]] = {
        (row, option): (0.0, 0) for s in sequences for row, option, _, _ in s.targets
    }
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i].ids), reverse=True)
    lengths = [len(sequences[i].ids) for i in order]
    start = 0
    sizes = length_batches(lengths, batch_size)
    while start < len(order):
        batch = [sequences[i] for i in order[start : start + sizes[0]]]
        try:
            scored = _score_batch(network, batch, device)
        except torch.cuda.OutOfMemoryError:
            if batch_size == 1:
                raise
            _free_memory(device)
            batch_size = max(1, min(batch_size, len(batch)) // 2)
            sizes = length_batches(lengths[start:], batch_size)
            warnings.warn(f"out of memory on {device}: retrying at batch size {batch_size}", ResourceWarning,
                          stacklevel=2)
            continue
        sizes = sizes[1:]
        for row, option, logprob in scored:
            total, count = results[(row, option)]
            results[(row, option)] = (total + logprob, count + 1)
        start += len(batch)
        if progress is not None:
            progress.update(len({t[0] for s in batch for t in s.targets}))
    return results, batch_size


def release(network: PreTrainedModel) -> None:
    """Free a model's memory now (its GPU memory too), before another engine takes the device."""
    device = str(next(network.parameters()).device)
    network.to("meta")
    _free_memory(device)


@torch.inference_mode()
def prompt_logprobs(network: PreTrainedModel, prompts: list[list[int]]) -> list[list[float | None]]:
    """Per token of each prompt its log-prob given the tokens before it (entry 0 None), one prompt at
    a time in plain causal attention: what another engine's prompt log-probs are checked against."""
    device = next(network.parameters()).device
    out = []
    for ids in prompts:
        logits = network(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0].float()
        logprobs = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(ids[1:], device=device)[:, None])
        out.append([None, *logprobs.squeeze(1).double().cpu().tolist()])
    return out


def score(
    items: pd.DataFrame,
    model: str | tuple[PreTrainedModel, PreTrainedTokenizerBase],
    *,
    model_name: str | None = None,
    batch_size: int | Literal["auto"] = 16,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    scorer_boundary: bool = False,
    store: ScoreStore | str | Path | None = None,
    chunk_items: int = 64,
    pack: bool = True,
    progress: bool = True,
) -> pd.DataFrame:
    """Score every item version with one model; return the scores table (docs/design.md, "Data contracts").

    `model` is a Hugging Face id, a local path, an offline short name (`smollm2-135m`,
    `gemma3-270m`) or an already loaded (model, tokenizer) pair. Both aggregates are kept
    (`lp_sum_*`, `ntok_*`, `lp_mean_*`); analyses choose one with `aggregate=`.

    With `store` (a `ScoreStore`, or a run folder holding one), every chunk of `chunk_items` items
    is stored as soon as it is scored, and rows already stored for this model and setting (same
    item id and same texts) are reused, so a rerun or an interrupted run scores nothing twice.

    `pack=True` runs an item's three options in one sequence that shares their common prefix
    (a custom 4D attention mask; the numbers are those of scoring each option alone). Use
    `pack=False` for a model whose attention does not accept a custom 4D mask. Packing is
    skipped for items longer than a model's sliding attention window, which a custom mask
    would bypass.

    `dtype` is the precision a model named by string is loaded in (None: `models.default_dtype`,
    fp32 on a CPU, bf16 on CUDA; ignored for a loaded pair). `torch.bfloat16` on a CPU with
    native bf16 (AVX512-BF16 or AMX) is the fast CPU path; the log-softmax is always taken in
    fp32. Stored rows record the precision they were scored in (column `scoring_dtype` of the
    store's files): with an explicit `dtype` only rows of that precision are reused, with None
    any stored row is.

    The items are checked against the items contract first (`validate_items`: a continuation
    with a leading space, an empty option or a duplicate id is an error naming the row and
    field, before any model loads). `batch_size="auto"` starts large and halves on CUDA
    out-of-memory (any batch size does); the size that worked is in the result's
    `attrs["batch_size"]`, and how many versions were scored now (not read back from the store)
    in `attrs["n_scored"]`. A store is written under the run's lock (`runstore.run_lock`): a
    second process scoring the same run stops with a message naming the first.
    """
    if isinstance(model, str):
        model_name = model_name or model
    elif model_name is None:
        raise ValueError("pass model_name= when giving an already loaded (model, tokenizer) pair")
    if batch_size != "auto" and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a whole number >= 1 or 'auto', not {batch_size!r}")
    missing = [c for c in ITEM_COLUMNS if c not in items.columns]
    if missing:
        raise ValueError(f"score(): the items lack column(s) {missing} of the items contract")
    items = validate_items(items, origin="score(): the items", first_row=0, require_originals=False)
    if store is not None and not isinstance(store, ScoreStore):
        store = ScoreStore(Path(store))
    with run_lock(store.run_folder) if store is not None else nullcontext():
        return _score(items, model, model_name=model_name, batch_size=batch_size, device=device, dtype=dtype,
                      scorer_boundary=scorer_boundary, store=store, chunk_items=chunk_items, pack=pack,
                      progress=progress)


def _score(items: pd.DataFrame, model, *, model_name: str, batch_size: int | Literal["auto"], device: str | None,
           dtype: torch.dtype | None, scorer_boundary: bool, store: ScoreStore | None, chunk_items: int, pack: bool,
           progress: bool) -> pd.DataFrame:
    wanted = _dtype_name(dtype) if dtype is not None and isinstance(model, str) else None
    done = stored_scores(store, model_name, scorer_boundary, items, wanted) if store is not None else pd.DataFrame()
    todo = items.loc[~items["item_id"].isin(done["item_id"])] if len(done) else items
    # Error 3 reuses the correct scores already stored for the same texts (`boundary_from_joint`).
    correct = (stored_scores(store, model_name, False, todo, wanted) if scorer_boundary and store is not None
               else pd.DataFrame())
    correct = correct.set_index("item_id") if len(correct) else pd.DataFrame(index=pd.Index([], name="item_id"))
    load_seconds = 0.0
    if len(todo):
        started = time.perf_counter()
        network, tokenizer = load_model(model, device=device, dtype=dtype) if isinstance(model, str) else model
        load_seconds = time.perf_counter() - started
        device = str(next(network.parameters()).device)
        scored_in = next(network.parameters()).dtype
        if device.startswith("cpu") and scored_in == torch.bfloat16 and not cpu_has_native_bf16():
            warnings.warn("scoring in bfloat16 on a CPU without native bf16 (AVX512-BF16 or AMX): it is emulated "
                          "and slower than float32", RuntimeWarning, stacklevel=3)
        window = getattr(network.config, "sliding_window", None) if pack else None
        todo = todo.iloc[longest_first(todo, tokenizer, scorer_boundary=scorer_boundary, pack=pack, window=window)]
        bar = tqdm(total=len(todo), desc=f"scoring {model_name}", unit="item", disable=not progress)
        for start in range(0, len(todo), chunk_items):
            chunk = todo.iloc[start : start + chunk_items].reset_index(drop=True)
            if scorer_boundary and len(correct):
                sequences, reused = boundary_sequences(chunk, tokenizer, correct, pack=pack, max_packed_length=window)
            else:
                sequences = build_sequences(chunk, tokenizer, scorer_boundary=scorer_boundary, pack=pack,
                                            max_packed_length=window)
                reused = {}
            if batch_size == "auto":
                batch_size = auto_batch_size(sequences, device)
            results, batch_size = _score_sequences(network, sequences, batch_size=batch_size, device=device,
                                                   progress=bar)
            for row, sums in reused.items():  # correct score minus the first token's log-prob
                for option, (total, count) in sums.items():
                    first, _ = results[(row, option)]
                    results[(row, option)] = (total - first if count > 1 else 0.0, count - 1)
            scored = scores_frame(chunk, results, model_name, scorer_boundary)
            if store is not None:
                store.append(scored.assign(**{DTYPE_COLUMN: _dtype_name(scored_in)}))
            done = pd.concat([done, scored], ignore_index=True) if len(done) else scored
        bar.close()
    table = scores_for_items(items, done, n_scored=len(todo), batch_size=batch_size)
    table.attrs["load_seconds"] = load_seconds  # apart from the scoring, so a page's speed is the scorer's
    return table


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
