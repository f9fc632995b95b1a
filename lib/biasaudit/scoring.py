"""Scoring item versions with a causal language model: log-probability of each continuation.

For every item version and option (stereotyped, anti-stereotyped, third) the model reads the
context followed by the option, and we sum the log-probabilities of the option's tokens.

How continuation tokens are found (the part pipelines most often get wrong): context and
continuation are tokenized *together*, and a token belongs to the continuation when it covers
any character after the end of the context (the joining space included). So a token that
merges the last context characters with the first continuation characters is scored with the
continuation, and the continuation's first token is always scored. When the tokenizer adds no
start token (SmolLM2's adds none), BOS (else EOS) is put in front, so that even a sentence
with an empty context has its first token predicted from something.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from biasaudit.items import ITEM_COLUMNS, OPTIONS, join_text
from biasaudit.models import load_model

TEXT_COLUMNS: list[str] = ["context", *OPTIONS]
SCORE_COLUMNS: list[str] = [f"{kind}_{o}" for o in OPTIONS for kind in ("lp_sum", "ntok", "lp_mean")]


@dataclass(frozen=True)
class Request:
    """One sequence to score: token ids and the positions whose tokens form the continuation."""

    row: int
    option: str
    ids: list[int]
    positions: list[int]


def start_token_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The id put in front of a sequence when the tokenizer adds none: BOS, else EOS."""
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return int(token_id)
    raise ValueError(f"{type(tokenizer).__name__} has neither a BOS nor an EOS token to start a sequence with")


def _with_start(tokenizer: PreTrainedTokenizerBase, ids: list[int], offsets: list[tuple[int, int]]):
    if ids and ids[0] in set(tokenizer.all_special_ids):
        return ids, offsets
    return [start_token_id(tokenizer), *ids], [(0, 0), *offsets]


def encode_joint(
    tokenizer: PreTrainedTokenizerBase, context: str, continuation: str, language: str
) -> tuple[list[int], list[int]]:
    """Token ids of context + continuation and the positions of the continuation's tokens."""
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("The scorer needs a fast tokenizer (character offsets); load it with use_fast=True")
    text = join_text(context, continuation, language)
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
    ids, offsets = _with_start(tokenizer, list(encoding["input_ids"]), list(encoding["offset_mapping"]))
    boundary = len(context)
    positions = [i for i, (start, end) in enumerate(offsets) if end > boundary and end > start]
    if positions and positions[0] == 0:
        raise ValueError("the first token of a sequence cannot be scored; a start token is missing")
    return ids, positions


def encode_separately(
    tokenizer: PreTrainedTokenizerBase, context: str, continuation: str, language: str
) -> tuple[list[int], list[int]]:
    """The `scorer_boundary` pipeline error, on purpose: see DESIGN.md, error 3.

    Context and continuation are tokenized on their own and concatenated, and scoring starts
    one token too late (at len(context ids) + 1), so the continuation's first token is never
    scored and a one-token continuation gets no tokens at all.
    """
    separator = join_text("x", "x", language)[1:-1] if context else ""
    context_encoding = tokenizer(context, return_offsets_mapping=True, add_special_tokens=True)
    context_ids, _ = _with_start(
        tokenizer, list(context_encoding["input_ids"]), list(context_encoding["offset_mapping"])
    )
    continuation_ids = list(tokenizer(separator + continuation, add_special_tokens=False)["input_ids"])
    ids = context_ids + continuation_ids
    return ids, list(range(len(context_ids) + 1, len(ids)))


def build_requests(
    items: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, *, scorer_boundary: bool = False
) -> list[Request]:
    encode = encode_separately if scorer_boundary else encode_joint
    requests = []
    for row, item in enumerate(items.itertuples(index=False)):
        for option in OPTIONS:
            ids, positions = encode(tokenizer, item.context, getattr(item, option), item.language)
            requests.append(Request(row, option, ids, positions))
    return requests


def _accepts_logits_to_keep(network: PreTrainedModel) -> bool:
    return "logits_to_keep" in inspect.signature(network.forward).parameters


@torch.inference_mode()
def _score_batch(network: PreTrainedModel, batch: list[Request], device: str) -> list[tuple[float, int]]:
    """Summed log-prob and token count of each request's continuation, in one padded forward pass."""
    length = max(len(r.ids) for r in batch)
    input_ids = torch.zeros((len(batch), length), dtype=torch.long)
    attention = torch.zeros((len(batch), length), dtype=torch.long)
    for b, request in enumerate(batch):
        input_ids[b, : len(request.ids)] = torch.tensor(request.ids)
        attention[b, : len(request.ids)] = 1
    # Only positions that predict a continuation token need logits; skipping the rest saves
    # most of the output-layer cost for models with large vocabularies (Gemma: 262k).
    needed = [p for r in batch for p in r.positions]
    if not needed:
        return [(0.0, 0) for _ in batch]
    first = min(needed) - 1
    kwargs = {"logits_to_keep": length - first} if _accepts_logits_to_keep(network) else {}
    logits = network(input_ids=input_ids.to(device), attention_mask=attention.to(device), **kwargs).logits
    offset = first if kwargs else 0
    rows = torch.tensor([b for b, r in enumerate(batch) for _ in r.positions], device=logits.device)
    cols = torch.tensor([p - 1 - offset for r in batch for p in r.positions], device=logits.device)
    targets = torch.tensor([r.ids[p] for r in batch for p in r.positions], device=logits.device)
    picked = logits[rows, cols].float()  # padding positions are never picked
    token_logprobs = picked.gather(1, targets[:, None]).squeeze(1) - torch.logsumexp(picked, dim=-1)
    sums = torch.zeros(len(batch), dtype=torch.float64, device=logits.device)
    sums.index_add_(0, rows, token_logprobs.double())
    return [(float(s), len(r.positions)) for s, r in zip(sums.cpu().tolist(), batch)]


def _score_requests(
    network: PreTrainedModel,
    requests: list[Request],
    *,
    batch_size: int,
    device: str,
    progress: tqdm | None,
) -> dict[tuple[int, str], tuple[float, int]]:
    order = sorted(range(len(requests)), key=lambda i: len(requests[i].ids), reverse=True)
    results: dict[tuple[int, str], tuple[float, int]] = {}
    for start in range(0, len(order), batch_size):
        batch = [requests[i] for i in order[start : start + batch_size]]
        for request, result in zip(batch, _score_batch(network, batch, device)):
            results[(request.row, request.option)] = result
        if progress is not None:
            progress.update(len(batch))
    return results


def _scores_frame(items: pd.DataFrame, results: dict[tuple[int, str], tuple[float, int]], model_name: str,
                  scorer_boundary: bool) -> pd.DataFrame:
    table = items[ITEM_COLUMNS].reset_index(drop=True).copy()
    table.insert(0, "model", model_name)
    for option in OPTIONS:
        sums = np.array([results[(row, option)][0] for row in range(len(table))])
        counts = np.array([results[(row, option)][1] for row in range(len(table))])
        table[f"lp_sum_{option}"] = sums
        table[f"ntok_{option}"] = counts
        # A continuation with no scored tokens (only under the boundary error) gets 0, as the
        # buggy pipelines that divide by max(count, 1) do.
        table[f"lp_mean_{option}"] = sums / np.maximum(counts, 1)
    table["scorer_boundary"] = scorer_boundary
    return table


def score(
    items: pd.DataFrame,
    model: str | tuple[PreTrainedModel, PreTrainedTokenizerBase],
    *,
    model_name: str | None = None,
    batch_size: int = 16,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    scorer_boundary: bool = False,
    out_path: str | Path | None = None,
    chunk_items: int = 64,
    progress: bool = True,
) -> pd.DataFrame:
    """Score every item version with one model; return the scores table of DESIGN.md.

    `model` is a Hugging Face id, a local path, an offline short name (`smollm2-135m`,
    `gemma3-270m`) or an already loaded (model, tokenizer) pair. Both aggregates are kept
    (`lp_sum_*`, `ntok_*`, `lp_mean_*`); analyses choose one with `aggregate=`.

    With `out_path`, rows are appended to that parquet file after every chunk of
    `chunk_items` items, and rows already there for this model and setting (same item id and
    same texts) are reused, so a rerun or an interrupted run scores nothing twice.
    """
    if isinstance(model, str):
        model_name = model_name or model
    elif model_name is None:
        raise ValueError("pass model_name= when giving an already loaded (model, tokenizer) pair")
    items = items[ITEM_COLUMNS].reset_index(drop=True)
    done = _read_done(out_path, model_name, scorer_boundary, items) if out_path else pd.DataFrame()
    todo = items.loc[~items["item_id"].isin(done["item_id"])] if len(done) else items
    if len(todo):
        network, tokenizer = load_model(model, device=device, dtype=dtype) if isinstance(model, str) else model
        device = str(next(network.parameters()).device)
        requests_total = 3 * len(todo)
        bar = tqdm(total=requests_total, desc=f"scoring {model_name}", unit="seq", disable=not progress)
        for start in range(0, len(todo), chunk_items):
            chunk = todo.iloc[start : start + chunk_items].reset_index(drop=True)
            requests = build_requests(chunk, tokenizer, scorer_boundary=scorer_boundary)
            results = _score_requests(network, requests, batch_size=batch_size, device=device, progress=bar)
            scored = _scores_frame(chunk, results, model_name, scorer_boundary)
            if out_path:
                _append(out_path, scored)
            done = pd.concat([done, scored], ignore_index=True) if len(done) else scored
        bar.close()
    order = {item_id: i for i, item_id in enumerate(items["item_id"])}
    return done.sort_values("item_id", key=lambda s: s.map(order)).reset_index(drop=True)


def _read_done(out_path: str | Path, model_name: str, scorer_boundary: bool, items: pd.DataFrame) -> pd.DataFrame:
    """Rows of an earlier run that still match the items (same id and texts) for this model and setting."""
    path = Path(out_path)
    if not path.exists():
        return pd.DataFrame()
    stored = pd.read_parquet(path)
    mine = stored.loc[(stored["model"] == model_name) & (stored["scorer_boundary"] == scorer_boundary)]
    merged = mine.merge(items[["item_id", *TEXT_COLUMNS, "language"]], on="item_id", suffixes=("", "_now"))
    same = np.logical_and.reduce([merged[c] == merged[f"{c}_now"] for c in [*TEXT_COLUMNS, "language"]])
    return merged.loc[same, list(mine.columns)].reset_index(drop=True)


def _append(out_path: str | Path, rows: pd.DataFrame) -> None:
    """Add rows to the parquet file, replacing stale rows with the same key; written atomically."""
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        stored = pd.read_parquet(path)
        key = ["model", "scorer_boundary", "item_id"]
        stale = stored.set_index(key).index.isin(rows.set_index(key).index)
        rows = pd.concat([stored.loc[~stale], rows], ignore_index=True)
    partial = path.with_name(path.name + ".partial")
    rows.to_parquet(partial, index=False)
    partial.replace(path)


def score_models(
    items: pd.DataFrame,
    models: list[str],
    *,
    out_path: str | Path,
    **kwargs,
) -> pd.DataFrame:
    """Score the items with each model in turn (one model in memory at a time)."""
    tables = [score(items, name, out_path=out_path, **kwargs) for name in models]
    return pd.concat(tables, ignore_index=True)
