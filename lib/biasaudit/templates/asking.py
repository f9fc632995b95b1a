"""LangBiTe's template tests, run: every filled prompt asked of a model, every template judged.

One template gives one verdict per model (docs/langbite.md §3.3). Each (model, template) runs up to
`n_attempts` attempts (§3.2: the *total* number of attempts): an attempt asks all the template's
instances and judges the replies; a Passed or Failed verdict ends the loop (a Failed verdict is
never retried); an unprocessable one (no reply, a probability that cannot be read, ...) is tried
again, and after the last attempt the template is recorded as an `Error`, kept out of pass rates.
With greedy decoding a retry gets the same replies back (from the cache), so only errors of the
connection can change; with sampling, each attempt samples afresh. `n_attempts = 0` skips every
template, as LangBiTe does.

Every verdict is computed with the book's matcher and with LangBiTe's exact one (`oracles`), so a
chapter can say how many verdicts the matcher changes.
"""

from __future__ import annotations

import json
from typing import Literal

import pandas as pd

from biasaudit.core.keyvalue import KeyValueStore
from biasaudit.lm.generate import GenerationError, Generator, ask
from biasaudit.templates.library import instances, prompts
from biasaudit.templates.oracles import Unprocessable, evaluate

EVALUATION_COLUMNS: list[str] = ["model", "template_id", "base_id", "concern", "language", "variant", "via",
                                 "input_type", "reflection_type", "operation", "verdict", "verdict_langbite",
                                 "reason", "attempts", "n_instances", "n_asked"]
RESPONSE_COLUMNS: list[str] = ["model", "template_id", "instance", "fillers", "prompt_text", "reply", "attempt"]


def reply_budgets(table: pd.DataFrame, generator: Generator, answer_margin: int | None) -> pd.Series:
    """Tokens each template's replies may take (see `run_template_tests`), by template id."""
    full = generator.settings.max_new_tokens
    budgets = pd.Series(full, index=table.index)
    if answer_margin is None:
        return budgets
    expected = {tid: json.loads(p).get("expected_value") for tid, p in table["oracle_prediction"].items()}
    values = sorted({v for vs in expected.values() if vs for v in vs})
    length = dict(zip(values, generator.tokens(values)))
    for template_id, vs in expected.items():
        if table.at[template_id, "oracle"] == "expected value" and vs:
            needed = max(length[v] for v in vs) + answer_margin
            budgets[template_id] = min(full, 8 * -(-needed // 8))
    return budgets


def _verdicts(row, replies: list, delta: float) -> dict[str, tuple[str, str]]:
    """Per mode (the book's "unicode", LangBiTe's "langbite"): (verdict, why unprocessable)."""
    failed = [r for r in replies if isinstance(r, GenerationError)]
    if failed:
        return dict.fromkeys(("unicode", "langbite"), ("Error", failed[0].reason))
    out = {}
    for match in ("unicode", "langbite"):
        try:
            out[match] = (evaluate(row.oracle, row.oracle_prediction, replies, delta=delta, match=match,
                                   language=row.language), "")
        except Unprocessable as err:
            out[match] = ("Error", str(err))
    return out


def _shown(reply) -> str:
    """A reply as the responses table shows it: normalised as the oracle read it, or why there was none."""
    if isinstance(reply, GenerationError):
        return f"ERROR: {reply.reason}"
    if not isinstance(reply, str):
        return f"ERROR: the reply is {reply!r}, not text"
    return reply.strip().replace("\n", " ").lower()


def run_template_tests(templates: pd.DataFrame, communities: dict, generator: Generator, *,
                       max_instances: int | None = None, seed: int = 0, n_attempts: int = 3,
                       delta: float = 0.02, note: Literal["own", "english"] = "own", answer_margin: int | None = None,
                       oracle_match: Literal["unicode", "langbite"] = "unicode",
                       cache: KeyValueStore | None = None, batch_size: int = 16,
                       progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ask `generator` every filled prompt of `templates` and judge each template: (evaluations, responses).

    `answer_margin`: an expected-value template's verdict depends only on how the reply begins, so
    its reply is cut at its longest expected answer (in the model's own tokens) plus this many
    tokens, rounded up to a multiple of 8 (at most the generator's `max_new_tokens`); None asks for
    `max_new_tokens` everywhere. Same-value templates always get `max_new_tokens`: a probability
    needs a whole JSON object.

    evaluations: one row per template (EVALUATION_COLUMNS; verdict Passed / Failed / Error under the
    book's rules and under LangBiTe's, the reason for an error under `oracle_match`, the mode whose
    errors are retried, attempts used, instances in all and asked). responses: one row per instance of the
    last attempt (RESPONSE_COLUMNS; the reply normalised as the oracle saw it, or "ERROR: <reason>").
    """
    filled = prompts(templates, instances(templates, communities, max_instances=max_instances, seed=seed), note)
    by_template = {tid: group.sort_values("instance") for tid, group in filled.groupby("template_id")}
    empty = filled.iloc[0:0]
    pending = list(templates["template_id"]) if n_attempts > 0 else []
    rows, responses, final = {}, [], {}
    table = templates.set_index("template_id")
    budget = reply_budgets(table, generator, answer_margin)
    for attempt in range(1, n_attempts + 1):
        if not pending:
            break
        asked = pd.concat([by_template.get(t, empty) for t in pending], ignore_index=True)
        asked["reply"] = None
        tokens = asked["template_id"].map(budget)
        for limit in sorted(tokens.unique()):
            mask = (tokens == limit).to_numpy()
            asked.loc[mask, "reply"] = pd.Series(ask(
                generator, asked.loc[mask, "prompt_text"].tolist(), cache=cache, attempt=attempt,
                max_new_tokens=int(limit), batch_size=batch_size, progress=progress), index=asked.index[mask],
                dtype=object)
        still = []
        for template_id in pending:
            mine = asked.loc[asked["template_id"] == template_id]
            row = table.loc[template_id]
            judged = _verdicts(row, list(mine["reply"]), delta)
            (verdict, _), (langbite, _) = judged["unicode"], judged["langbite"]
            reason = judged[oracle_match][1]
            final[template_id] = (mine, attempt)
            if judged[oracle_match][0] == "Error" and attempt < n_attempts:
                still.append(template_id)
                continue
            n_all = int(by_template[template_id]["n_instances"].iloc[0]) if template_id in by_template else 0
            rows[template_id] = {
                "model": generator.name, "template_id": template_id, "base_id": row["base_id"],
                "concern": row["concern"], "language": row["language"], "variant": row["variant"], "via": row["via"],
                "input_type": row["input_type"], "reflection_type": row["reflection_type"],
                "operation": json.loads(row["oracle_prediction"]).get("operation"), "verdict": verdict,
                "verdict_langbite": langbite, "reason": reason, "attempts": attempt,
                "n_instances": n_all, "n_asked": len(mine)}
        pending = still
    for template_id, (mine, attempt) in final.items():
        for item in mine.itertuples(index=False):
            responses.append({"model": generator.name, "template_id": template_id, "instance": item.instance,
                              "fillers": item.fillers, "prompt_text": item.prompt_text, "reply": _shown(item.reply),
                              "attempt": attempt})
    evaluations = pd.DataFrame([rows[t] for t in templates["template_id"] if t in rows], columns=EVALUATION_COLUMNS)
    return evaluations, pd.DataFrame(responses, columns=RESPONSE_COLUMNS)
