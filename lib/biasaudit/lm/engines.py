"""Scoring engines beyond transformers: anything that returns prompt log-probabilities.

`scoring.score` runs transformers itself (packed sequences; the default and the reference). The
other engines run the model elsewhere, vLLM in this process (`lm.vllm_engine`) or any
OpenAI-compatible `/v1/completions` server (`lm.completions`), and answer one question: for each
token of a prompt, its log-probability given the tokens before it. Everything else is shared with
`score`: the tokenizer runs here, the start token is put in front by the project (never by the
engine), the continuation's tokens are found by the same character walk (`tokens.build_sequences`),
and the scores table and store are the same. An engine is sent token ids, never text, so its own
tokenizer cannot move a boundary.

A server's prompt log-probs are not trusted blindly (one llama.cpp server returned plausible numbers
for the right tokens that were simply wrong): `check_engine` scores a few fixed sentences through the
engine before a run and stops it when they disagree with transformers, or with themselves.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from biasaudit.core.store import (
    DTYPE_COLUMN,
    ScoreStore,
    scores_for_items,
    stored_scores,
)
from biasaudit.data.item_table import ITEM_COLUMNS, OPTIONS, join_text
from biasaudit.lm.tokens import Sequence, build_sequences, encode_joint

ENGINES: tuple[str, ...] = ("transformers", "vllm", "completions")
# Sentences every engine check scores (a context, then a continuation whose tokens are compared).
CHECK_TEXTS: tuple[tuple[str, str, str], ...] = (
    ("The nurse said that", "she was tired.", "en"),
    ("My grandmother cannot", "use a phone.", "en"),
    ("La enfermera dijo que", "ella estaba cansada.", "es"),
    ("护士说", "她累了。", "zh"),
)
Logprobs = list[list[float | None]]


class EngineError(RuntimeError):
    """An engine's answer cannot be used; the message names the engine, the model and what was wrong."""


# An engine declared to compute in fp32 agrees with transformers' fp32 to about 1e-4 nats per token on the
# check's sentences (vLLM on a CPU: 2.5e-5); in bf16 it differs by tenths of a nat (a bf16 vLLM server
# serving SmolLM2: 0.21).
FP32_AGREEMENT: float = 1e-2


def precision_label(engine: str, dtype: str) -> str:
    """What the score store records for rows an engine scored ("vllm-bfloat16", "completions-float32"):
    never a bare dtype, so an engine's rows are not mistaken for transformers'; the engine's name alone
    where the precision was not declared."""
    return f"{engine}-{dtype}" if dtype else engine


class PromptLogprobEngine(ABC):
    """Token-id prompts in, per-token log-probs out: entry p is log P(ids[p] | ids[:p]), entry 0 None."""

    name: str = "?"
    dtype: str = ""  # the precision it computes in, where known or declared

    def __init__(self, model: str):
        self.model = model

    @abstractmethod
    def prompt_logprobs(self, prompts: list[list[int]]) -> Logprobs:
        """One list per prompt, as long as the prompt."""

    def precision(self) -> str:
        """What the score store records as the rows' precision (`precision_label`)."""
        return precision_label(self.name, self.dtype)

    def describe(self) -> dict:
        return {"engine": self.name, "model": self.model}


def scores_frame(items: pd.DataFrame, results: dict[tuple[int, str], tuple[float, int]], model_name: str,
                 scorer_boundary: bool) -> pd.DataFrame:
    """The scores table of `items` (rows numbered from 0) from summed log-probs per (row, option)."""
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


def sums_from_logprobs(sequences: list[Sequence], logprobs: Logprobs, origin: str
                       ) -> dict[tuple[int, str], tuple[float, int]]:
    """Summed log-prob and token count per (row, option) of unpacked sequences, from their prompt log-probs."""
    results: dict[tuple[int, str], tuple[float, int]] = {
        (row, option): (0.0, 0) for s in sequences for row, option, _, _ in s.targets}
    for sequence, values in zip(sequences, logprobs, strict=True):
        if len(values) != len(sequence.ids):
            raise EngineError(f"{origin}: {len(values)} prompt log-probs for a prompt of {len(sequence.ids)} tokens")
        for row, option, index, token in sequence.targets:
            value = values[index + 1]  # the logits at `index` predict the token at index + 1
            if sequence.ids[index + 1] != token:
                raise ValueError(f"target token {token} is not at position {index + 1}")
            if value is None or not math.isfinite(value) or value > 1e-6:
                raise EngineError(f"{origin}: the log-prob of token {index + 1} is {value!r}, not a log-probability")
            total, count = results[(row, option)]
            results[(row, option)] = (total + value, count + 1)
    return results


def score_with_engine(items: pd.DataFrame, engine: PromptLogprobEngine, tokenizer, *, model_name: str,
                      scorer_boundary: bool = False, store: ScoreStore | None = None, chunk_items: int = 64,
                      progress: bool = True) -> pd.DataFrame:
    """`scoring.score` through another engine: the same items in, the same scores table out, resuming
    from `store` (rows of this model and setting already stored are not sent again). The caller holds
    the run's lock when a store is given. An engine whose precision is known reuses only rows of it."""
    wanted = engine.precision() if engine.dtype else None
    done = stored_scores(store, model_name, scorer_boundary, items, wanted) if store is not None else pd.DataFrame()
    todo = items.loc[~items["item_id"].isin(done["item_id"])] if len(done) else items
    bar = tqdm(total=len(todo), desc=f"scoring {model_name} ({engine.name})", unit="item", disable=not progress)
    for start in range(0, len(todo), chunk_items):
        chunk = todo.iloc[start:start + chunk_items].reset_index(drop=True)
        scored = score_chunk(chunk, engine, tokenizer, model_name=model_name, scorer_boundary=scorer_boundary)
        if store is not None:
            store.append(scored.assign(**{DTYPE_COLUMN: engine.precision()}))
        done = pd.concat([done, scored], ignore_index=True) if len(done) else scored
        bar.update(len(chunk))
    bar.close()
    return scores_for_items(items, done, n_scored=len(todo), batch_size="auto")


def score_chunk(chunk: pd.DataFrame, engine: PromptLogprobEngine, tokenizer, *, model_name: str,
                scorer_boundary: bool) -> pd.DataFrame:
    """One chunk of items (rows numbered from 0) scored through `engine`: one prompt per option."""
    sequences = build_sequences(chunk, tokenizer, scorer_boundary=scorer_boundary, pack=False)
    logprobs = engine.prompt_logprobs([s.ids for s in sequences])
    results = sums_from_logprobs(sequences, logprobs, f"{engine.name} engine, model {engine.model}")
    return scores_frame(chunk, results, model_name, scorer_boundary)


def check_prompts(tokenizer) -> list[tuple[list[int], list[int], str]]:
    """The engine check's prompts: (ids with the start token, positions of the continuation, text)."""
    prompts = []
    for context, continuation, language in CHECK_TEXTS:
        ids, positions = encode_joint(tokenizer, context, continuation, language)
        prompts.append((ids, positions, join_text(context, continuation, language)))
    return prompts


def check_engine(engine: PromptLogprobEngine, tokenizer, *, tolerance: float,
                 reference: Logprobs | None = None) -> pd.DataFrame:
    """Score the fixed sentences through `engine` and compare, on the continuation tokens: with
    `reference` (their log-probs by transformers on this machine, `scoring.prompt_logprobs` on the
    ids of `check_prompts`, when the model can be loaded here), and with the engine itself (each
    prompt alone against in a batch; a prompt's first half against the whole). Returns one row per
    sentence and comparison; raises EngineError beyond `tolerance` (nats)."""
    prompts = check_prompts(tokenizer)
    ids = [p[0] for p in prompts]
    batched = engine.prompt_logprobs(ids)
    comparisons = {"alone vs in a batch": [engine.prompt_logprobs([i])[0] for i in ids]}
    if reference is not None:
        comparisons["transformers"] = reference
    halves = [i[: max(2, len(i) // 2 + 1)] for i in ids]
    prefix = engine.prompt_logprobs(halves)
    rows = []
    for k, (prompt_ids, positions, text) in enumerate(prompts):
        for name, values in comparisons.items():
            rows.append(_compare(text, name, batched[k], values[k], positions, tolerance))
        rows.append(_compare(text, "first half vs whole", batched[k], prefix[k], range(1, len(halves[k])), tolerance))
    table = pd.DataFrame(rows)
    failed = table.loc[~table["agrees"]]
    if len(failed):
        first = failed.iloc[0]
        raise EngineError(
            f"the {engine.name} engine's prompt log-probs for {engine.model} fail the check before a run: on "
            f"{first['text']!r} ({first['comparison']}) they differ by up to {first['max_abs_diff']:.4g} nats "
            f"(tolerance {tolerance:g}; engine {first['engine']}, other {first['other']} at token {first['token']}). "
            "Nothing was scored. A server that does not compute prompt log-probs correctly gives numbers like these; "
            "see docs/design.md, \"Engines and executors\".")
    return table


def check_declared_precision(engine: PromptLogprobEngine, check: pd.DataFrame) -> None:
    """An engine said to compute in fp32 must agree with transformers' fp32 as fp32 does (`FP32_AGREEMENT`),
    or its scores would be stored as fp32 when they are not: a server started without `--dtype float32`."""
    against = check.loc[check["comparison"] == "transformers", "max_abs_diff"]
    if engine.dtype == "float32" and len(against) and against.max() > FP32_AGREEMENT:
        raise EngineError(
            f"the {engine.name} engine for {engine.model} is declared to compute in float32, but on the check's "
            f"sentences it differs from transformers in fp32 by up to {against.max():.3g} nats (fp32 agrees to "
            f"{FP32_AGREEMENT:g}; bf16 differs by tenths of a nat). Start the server with --dtype float32, or declare the "
            "precision it runs in (engine_precision). Nothing was scored.")


def _compare(text: str, name: str, got: list, other: list, positions, tolerance: float) -> dict:
    worst, at = 0.0, None
    for p in positions:
        a, b = got[p] if p < len(got) else None, other[p] if p < len(other) else None
        gap = math.inf if a is None or b is None else abs(float(a) - float(b))
        if not gap <= worst:  # also catches NaN
            worst, at = gap, p
    if at is None:
        at = next(iter(positions), 0)
    pick = (lambda values: values[at] if at < len(values) else None)
    return {"text": text, "comparison": name, "tokens": len(list(positions)), "max_abs_diff": worst,
            "agrees": worst <= tolerance, "token": at, "engine": pick(got), "other": pick(other)}
