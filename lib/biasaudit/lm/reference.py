"""A deliberately naive reference scorer, kept apart from `scoring` to check it and to time it.

One sequence at a time, full softmax at every position, no batching, padding, packing or
logit skipping; continuation tokens found by its own walk over the joint tokenization. Slow
on purpose: the tests compare `scoring.score` against it, and benchmarks/ measure the speed-up.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from biasaudit.data.item_table import OPTIONS, join_text


@torch.inference_mode()
def naive_logprob(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, context: str, continuation: str, language: str
) -> tuple[float, int]:
    """(summed log-prob, token count) of `continuation` after `context`."""
    text = join_text(context, continuation, language)
    encoding = tokenizer(text, return_offsets_mapping=True)
    ids = list(encoding["input_ids"])
    spans = list(encoding["offset_mapping"])
    if not ids or ids[0] not in tokenizer.all_special_ids:
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        ids, spans = [start, *ids], [(0, 0), *spans]
    first = next(i for i, (s, e) in enumerate(spans) if e > s and e > len(context))
    device = next(model.parameters()).device
    logits = model(torch.tensor([ids], device=device)).logits[0].double()
    probabilities = torch.softmax(logits, dim=-1)
    total, count = 0.0, 0
    for position in range(first, len(ids)):
        if spans[position][1] > spans[position][0]:
            total += math.log(float(probabilities[position - 1, ids[position]]))
            count += 1
    return total, count


def naive_scores(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, items: pd.DataFrame) -> pd.DataFrame:
    """item_id plus lp_sum_<option> and ntok_<option> for every item, one sequence at a time."""
    rows = []
    for item in items.itertuples(index=False):
        row = {"item_id": item.item_id}
        for option in OPTIONS:
            row[f"lp_sum_{option}"], row[f"ntok_{option}"] = naive_logprob(
                model, tokenizer, item.context, getattr(item, option), item.language
            )
        rows.append(row)
    return pd.DataFrame(rows)
