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
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from biasaudit.data.item_table import ITEM_COLUMNS, OPTIONS, join_text, validate_items
from biasaudit.lm.registry import cpu_has_native_bf16, load_model
from biasaudit.run.store import DTYPE_COLUMN, ScoreStore, run_lock

TEXT_COLUMNS: list[str] = ["context", *OPTIONS]
# batch_size="auto": at most this many sequences per batch, and on a CPU about this many tokens.
AUTO_MAX_BATCH = 64
AUTO_CPU_TOKENS = 2048
SCORE_COLUMNS: list[str] = [f"{kind}_{o}" for o in OPTIONS for kind in ("lp_sum", "ntok", "lp_mean")]


@dataclass(frozen=True)
class Sequence:
    """One row of a forward pass and what to read from it.

    `segments` is -1 for tokens every option shares (the common prefix) and k for the tokens of
    the k-th packed option; a token attends to the prefix and to earlier tokens of its own
    segment only. `targets` lists (row, option, logit index, token id): the token id's
    log-prob is read from the logits at that index.
    """

    ids: list[int]
    position_ids: list[int]
    segments: list[int]
    targets: list[tuple[int, str, int, int]]

    @property
    def packed(self) -> bool:
        return any(s >= 0 for s in self.segments)


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


def boundary_example(tokenizer, context: str, continuation: str, language: str = "en") -> pd.DataFrame:
    """The tokens of context + continuation and which ones each scorer scores (error 3).

    Columns: scorer ("joint (correct)" or "separate (boundary error)"), position, token (its
    text), part ("context" or "continuation", as that scorer splits the text) and scored (the
    token's log-prob is summed into the continuation's score)."""
    separator = join_text("x", "x", language)[1:-1] if context else ""
    continuation_length = len(tokenizer(separator + continuation, add_special_tokens=False)["input_ids"])
    rows = []
    for name, encode in (("joint (correct)", encode_joint), ("separate (boundary error)", encode_separately)):
        ids, positions = encode(tokenizer, context, continuation, language)
        scored = set(positions)
        if name.startswith("joint"):
            first = min(positions) if positions else len(ids)
        else:
            first = len(ids) - continuation_length
        for position, token_id in enumerate(ids):
            rows.append({"scorer": name, "position": position, "token": tokenizer.decode([token_id]),
                         "part": "continuation" if position >= first else "context",
                         "scored": position in scored})
    return pd.DataFrame(rows)


def _single(row: int, option: str, ids: list[int], positions: list[int]) -> Sequence:
    """One option on its own, in a plain causal sequence."""
    targets = [(row, option, p - 1, ids[p]) for p in positions]
    return Sequence(ids, list(range(len(ids))), [-1] * len(ids), targets)


def _packed(row: int, encoded: dict[str, tuple[list[int], list[int]]]) -> Sequence:
    """The options of one item in one sequence: their common prefix once, then each option's rest.

    Each option keeps the position ids it would have alone and sees only the prefix and itself,
    so its log-probs equal those of scoring it alone, while the shared context is run once.
    """
    all_ids = [ids for ids, _ in encoded.values()]
    common = 0
    while all(len(ids) > common for ids in all_ids) and len({ids[common] for ids in all_ids}) == 1:
        common += 1
    ids, position_ids, segments = list(all_ids[0][:common]), list(range(common)), [-1] * common
    targets = []
    for k, (option, (option_ids, positions)) in enumerate(encoded.items()):
        start = len(ids)
        ids += option_ids[common:]
        position_ids += list(range(common, len(option_ids)))
        segments += [k] * (len(option_ids) - common)

        def packed_index(i: int) -> int:
            return i if i < common else start + i - common

        targets += [(row, option, packed_index(p - 1), option_ids[p]) for p in positions]
    return Sequence(ids, position_ids, segments, targets)


def build_sequences(
    items: pd.DataFrame,
    tokenizer: PreTrainedTokenizerBase,
    *,
    scorer_boundary: bool = False,
    pack: bool = True,
    max_packed_length: int | None = None,
) -> list[Sequence]:
    """Tokenize every option of every item; pack an item's options into one sequence when allowed."""
    encode = encode_separately if scorer_boundary else encode_joint
    sequences = []
    for row, item in enumerate(items.itertuples(index=False)):
        encoded = {o: encode(tokenizer, item.context, getattr(item, o), item.language) for o in OPTIONS}
        packed = _packed(row, encoded) if pack else None
        if packed is not None and (max_packed_length is None or len(packed.ids) <= max_packed_length):
            sequences.append(packed)
        else:
            sequences += [_single(row, o, ids, positions) for o, (ids, positions) in encoded.items()]
    return sequences


def _boundary_from_joint(tokenizer: PreTrainedTokenizerBase, item) -> tuple[list[int], dict[str, int]] | None:
    """Error 3 on an item whose options tokenize the same way jointly and separately: (the context's
    ids, start token included; each option's first continuation token), else None.

    Then the erroneous scorer sums exactly the correct scorer's tokens but the first, so its score is
    the correct one minus that token's log-prob, which a forward pass of the context alone gives for
    all three options at once (`_score`): about a third of the tokens of scoring the item again."""
    prefix, firsts = None, {}
    for option in OPTIONS:
        continuation = getattr(item, option)
        ids, positions = encode_joint(tokenizer, item.context, continuation, item.language)
        separate_ids, separate_positions = encode_separately(tokenizer, item.context, continuation, item.language)
        start = len(separate_ids) - len(separate_positions) - 1  # the first continuation token, which error 3 skips
        if ids != separate_ids or positions != list(range(start, len(ids))) or (prefix not in (None, ids[:start])):
            return None
        prefix, firsts[option] = ids[:start], ids[start]
    return prefix, firsts


def _boundary_sequences(items: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, correct: pd.DataFrame, *,
                        pack: bool, max_packed_length: int | None) -> tuple[list[Sequence], dict[int, dict]]:
    """Error 3's sequences for `items`: the context alone where the correct scores (`correct`, indexed
    by item id) can be reused (`_boundary_from_joint`), the erroneous sequences elsewhere; and, per
    reused row, each option's correct (lp_sum, ntok)."""
    sequences, reused, others = [], {}, []
    for row, item in enumerate(items.itertuples(index=False)):
        plan = _boundary_from_joint(tokenizer, item) if item.item_id in correct.index else None
        if plan is None:
            others.append(row)
            continue
        prefix, firsts = plan
        targets = [(row, option, len(prefix) - 1, token) for option, token in firsts.items()]
        sequences.append(Sequence(prefix, list(range(len(prefix))), [-1] * len(prefix), targets))
        stored = correct.loc[item.item_id]
        reused[row] = {o: (float(stored[f"lp_sum_{o}"]), int(stored[f"ntok_{o}"])) for o in OPTIONS}
    rest = build_sequences(items.iloc[others], tokenizer, scorer_boundary=True, pack=pack,
                           max_packed_length=max_packed_length)
    # build_sequences numbers the rows of items.iloc[others] from 0: back to the rows of `items`
    rest = [Sequence(s.ids, s.position_ids, s.segments, [(others[row], *target) for row, *target in s.targets])
            for s in rest]
    return sequences + rest, reused


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
    # padding positions are never picked; the log-softmax is taken in fp32 whatever the model's precision
    picked = (logits[0] if gathered else logits[rows.to(logits.device), cols.to(logits.device)]).float()
    tokens = torch.tensor([t[4] for t in targets], device=picked.device)
    logprobs = (picked.gather(1, tokens[:, None]).squeeze(1) - torch.logsumexp(picked, dim=-1)).double()
    return [(t[1], t[2], lp) for t, lp in zip(targets, logprobs.cpu().tolist())]


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
    are formed by length.

    On CUDA out-of-memory the batch is halved and retried (down to one sequence): a long run is
    never lost to one batch too large. An option with no scored token (only under the boundary
    error) is absent from the result.
    """
    results: dict[tuple[int, str], tuple[float, int]] = {
        (row, option): (0.0, 0) for s in sequences for row, option, _, _ in s.targets
    }
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i].ids), reverse=True)
    start = 0
    while start < len(order):
        batch = [sequences[i] for i in order[start : start + batch_size]]
        try:
            scored = _score_batch(network, batch, device)
        except torch.cuda.OutOfMemoryError:
            if batch_size == 1:
                raise
            _free_memory(device)
            batch_size = max(1, batch_size // 2)
            warnings.warn(f"out of memory on {device}: retrying at batch size {batch_size}", ResourceWarning,
                          stacklevel=2)
            continue
        for row, option, logprob in scored:
            total, count = results[(row, option)]
            results[(row, option)] = (total + logprob, count + 1)
        start += len(batch)
        if progress is not None:
            progress.update(len({t[0] for s in batch for t in s.targets}))
    return results, batch_size


def _scores_frame(items: pd.DataFrame, results: dict[tuple[int, str], tuple[float, int]], model_name: str,
                  scorer_boundary: bool) -> pd.DataFrame:
    table = items[ITEM_COLUMNS].reset_index(drop=True).copy()
    table.insert(0, "model", model_name)
    for option in OPTIONS:
        sums = np.array([results.get((row, option), (0.0, 0))[0] for row in range(len(table))])
        counts = np.array([results.get((row, option), (0, 0))[1] for row in range(len(table))])
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
    batch_size: int | Literal["auto"] = 16,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    scorer_boundary: bool = False,
    store: ScoreStore | str | Path | None = None,
    chunk_items: int = 64,
    pack: bool = True,
    progress: bool = True,
) -> pd.DataFrame:
    """Score every item version with one model; return the scores table of DESIGN.md.

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
    done = _read_done(store, model_name, scorer_boundary, items, wanted) if store is not None else pd.DataFrame()
    todo = items.loc[~items["item_id"].isin(done["item_id"])] if len(done) else items
    # Error 3 reuses the correct scores already stored for the same texts (`_boundary_from_joint`).
    correct = (_read_done(store, model_name, False, todo, wanted) if scorer_boundary and store is not None
               else pd.DataFrame())
    correct = correct.set_index("item_id") if len(correct) else pd.DataFrame(index=pd.Index([], name="item_id"))
    if len(todo):
        network, tokenizer = load_model(model, device=device, dtype=dtype) if isinstance(model, str) else model
        device = str(next(network.parameters()).device)
        scored_in = next(network.parameters()).dtype
        if device.startswith("cpu") and scored_in == torch.bfloat16 and not cpu_has_native_bf16():
            warnings.warn("scoring in bfloat16 on a CPU without native bf16 (AVX512-BF16 or AMX): it is emulated "
                          "and slower than float32", RuntimeWarning, stacklevel=3)
        window = getattr(network.config, "sliding_window", None) if pack else None
        todo = todo.iloc[_longest_first(todo, tokenizer, scorer_boundary=scorer_boundary, pack=pack, window=window)]
        bar = tqdm(total=len(todo), desc=f"scoring {model_name}", unit="item", disable=not progress)
        for start in range(0, len(todo), chunk_items):
            chunk = todo.iloc[start : start + chunk_items].reset_index(drop=True)
            if scorer_boundary and len(correct):
                sequences, reused = _boundary_sequences(chunk, tokenizer, correct, pack=pack, max_packed_length=window)
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
            scored = _scores_frame(chunk, results, model_name, scorer_boundary)
            if store is not None:
                store.append(scored.assign(**{DTYPE_COLUMN: _dtype_name(scored_in)}))
            done = pd.concat([done, scored], ignore_index=True) if len(done) else scored
        bar.close()
    # Item columns come from `items` as given now: stored rows may predate an edit of metadata
    # (dimension, via, ...) that did not change the texts, and so was not rescored.
    scores = done[["model", "item_id", *SCORE_COLUMNS, "scorer_boundary"]]
    table = items.merge(scores, on="item_id", how="inner", validate="one_to_one")
    table = table[["model", *ITEM_COLUMNS, *SCORE_COLUMNS, "scorer_boundary"]]
    table.attrs["batch_size"] = batch_size  # "auto" when nothing needed scoring
    table.attrs["n_scored"] = len(todo)  # the rest were read back from the store
    return table


def _longest_first(items: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, *, scorer_boundary: bool, pack: bool,
                   window: int | None) -> np.ndarray:
    """Positions of `items`, the item that forwards the most tokens first. Chunks (and so batches) of
    items of similar length pad less. Tokenizing twice costs about 1% of scoring on a CPU; on the
    default bank, padding falls from 14% of the tokens forwarded (SmolLM2; Gemma 9%), when items
    were ordered by their UTF-8 bytes, to 2% (Gemma 1%)."""
    sequences = build_sequences(items, tokenizer, scorer_boundary=scorer_boundary, pack=pack,
                                max_packed_length=window)
    tokens = np.zeros(len(items))
    for sequence in sequences:
        if sequence.targets:  # (a sequence without any has no row; only the boundary error makes one)
            tokens[sequence.targets[0][0]] += len(sequence.ids)
    return np.argsort(-tokens, kind="stable")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _read_done(store: ScoreStore, model_name: str, scorer_boundary: bool, items: pd.DataFrame,
               dtype_name: str | None = None) -> pd.DataFrame:
    """Stored rows that still match the items (same id and texts) for this model and setting, and
    were scored in `dtype_name` when one is given (rows stored before the precision was recorded
    match only None)."""
    mine = store.read(model=model_name, scorer_boundary=scorer_boundary)
    if mine.empty:
        return pd.DataFrame()
    if dtype_name is not None:
        stored_in = mine[DTYPE_COLUMN] if DTYPE_COLUMN in mine else pd.Series(None, index=mine.index, dtype=object)
        mine = mine.loc[stored_in == dtype_name].reset_index(drop=True)
        if mine.empty:
            return pd.DataFrame()
    merged = mine.merge(items[["item_id", *TEXT_COLUMNS, "language"]], on="item_id", suffixes=("", "_now"))
    same = np.logical_and.reduce([merged[c] == merged[f"{c}_now"] for c in [*TEXT_COLUMNS, "language"]])
    return merged.loc[same, list(mine.columns)].reset_index(drop=True)
