"""What a scorer scores, built with the tokenizer alone (no torch): an option's token ids and the
positions whose next token is scored, jointly with its context or (pipeline error 3) separately,
and the packed sequences `scoring.score` runs through the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from biasaudit.data.item_table import OPTIONS, join_text

if TYPE_CHECKING:  # annotations only: building sequences needs the tokenizer object, not transformers
    from transformers import PreTrainedTokenizerBase


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
    """The `scorer_boundary` pipeline error, on purpose: see docs/design.md, "Pipeline errors".

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


def boundary_from_joint(tokenizer: PreTrainedTokenizerBase, item) -> tuple[list[int], dict[str, int]] | None:
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


def boundary_sequences(items: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, correct: pd.DataFrame, *,
                        pack: bool, max_packed_length: int | None) -> tuple[list[Sequence], dict[int, dict]]:
    """Error 3's sequences for `items`: the context alone where the correct scores (`correct`, indexed
    by item id) can be reused (`boundary_from_joint`), the erroneous sequences elsewhere; and, per
    reused row, each option's correct (lp_sum, ntok)."""
    sequences, reused, others = [], {}, []
    for row, item in enumerate(items.itertuples(index=False)):
        plan = boundary_from_joint(tokenizer, item) if item.item_id in correct.index else None
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


def longest_first(items: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, *, scorer_boundary: bool, pack: bool,
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
