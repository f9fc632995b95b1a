"""Templates translated and paraphrased by machine (MLA-BiTe), with their placeholders checked.

A template is translated field by field: the task prefix, the prompt, the output formatting and
each expected answer of its oracle (a "No" must become the target language's "No", or no reply
could ever pass). The translators' prompts keep `{PLACEHOLDER}` markers as they are, and a
translation whose markers changed (one lost, added or renamed) is failed with that reason
(`biasaudit.translate.cleaning.validate_output`), never used: such a template is counted as failed,
with the field and reason. Paraphrases reword the prompt only (the answer format and expected
answers stay as they are), P per template, in one request, so that they differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from biasaudit.templates.library import TEMPLATE_COLUMNS, write_langbite_file
from biasaudit.translate import Paraphraser, Translator, slug

FAILED_COLUMNS: list[str] = ["template_id", "base_id", "language", "via", "field", "text", "reason"]


def translate_templates(templates: pd.DataFrame, translator: Translator, targets: list[str]
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The English originals in `templates` translated into each target: (translated, failed).

    Translated templates keep their base_id, concern, types and oracle; variant "translation", via
    the translator's name. One failed field fails the template (its first failure is listed)."""
    originals = templates.loc[templates["variant"] == "original"].reset_index(drop=True)
    predictions = [json.loads(p) for p in originals["oracle_prediction"]]
    made, failed = [], []
    for target in targets:
        fields = {name: originals[name].tolist() for name in ("task_prefix", "prompt", "output_formatting")}
        values = sorted({v for p in predictions for v in p.get("expected_value", [])})
        table = translator.translate_detailed([t for column in fields.values() for t in column] + values, "en", target)
        size = len(originals)
        out = {name: table.iloc[k * size:(k + 1) * size] for k, name in enumerate(fields)}
        answers = dict(zip(values, table.iloc[len(fields) * size:].itertuples(index=False)))
        for position, row in originals.iterrows():
            template_id = f"{row['base_id']}/{target}@{slug(translator.name)}"
            problem = next(((name, out[name].iloc[position]) for name in fields
                            if out[name].iloc[position].translation is None), None)
            prediction = dict(predictions[position])
            if problem is None and "expected_value" in prediction:
                bad = next((answers[v] for v in prediction["expected_value"] if answers[v].translation is None), None)
                problem = ("oracle_prediction", bad) if bad is not None else None
                if problem is None:
                    prediction["expected_value"] = [answers[v].translation for v in prediction["expected_value"]]
            if problem is not None:
                name, result = problem
                failed.append({"template_id": template_id, "base_id": row["base_id"], "language": target,
                               "via": translator.name, "field": name, "text": result.text, "reason": result.reason})
                continue
            made.append({**row.to_dict(), "template_id": template_id, "language": target, "variant": "translation",
                         "via": translator.name, "task_prefix": out["task_prefix"].iloc[position].translation,
                         "prompt": out["prompt"].iloc[position].translation,
                         "output_formatting": out["output_formatting"].iloc[position].translation,
                         "oracle_prediction": json.dumps(prediction, ensure_ascii=False)})
    return pd.DataFrame(made, columns=[*TEMPLATE_COLUMNS, *[c for c in templates.columns
                                                             if c not in TEMPLATE_COLUMNS]]), \
        pd.DataFrame(failed, columns=FAILED_COLUMNS)


def paraphrase_templates(templates: pd.DataFrame, paraphraser: Paraphraser) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`paraphraser.n` rewordings of each template's prompt, in its own language: (paraphrases, failed).

    Rewording k of a template is variant "paraphrase", via "<paraphraser>:p<k>"; a template with fewer
    than k usable rewordings fails for k (with the reason), e.g. when a marker was lost."""
    made, failed = [], []
    for language, group in templates.groupby("language", sort=False):
        table = paraphraser.paraphrase_detailed(group["prompt"].tolist(), language)
        for (_, row), rewordings, reason in zip(group.iterrows(), table["rewordings"], table["reason"]):
            for k in range(1, paraphraser.n + 1):
                via = f"{paraphraser.name}:p{k}"
                template_id = f"{row['base_id']}/{language}~{slug(paraphraser.name)}-p{k}"
                if len(rewordings) < k:
                    failed.append({"template_id": template_id, "base_id": row["base_id"], "language": language,
                                   "via": via, "field": "prompt", "text": row["prompt"],
                                   "reason": reason or "no rewording"})
                    continue
                made.append({**row.to_dict(), "template_id": template_id, "variant": "paraphrase", "via": via,
                             "prompt": rewordings[k - 1]})
    return pd.DataFrame(made, columns=list(templates.columns)), pd.DataFrame(failed, columns=FAILED_COLUMNS)


def write_library(templates: pd.DataFrame, folder: Path) -> list[Path]:
    """Machine-made templates as LangBiTe-format files, one per language and route
    (`prompts_<language>--<via>.csv`), so that LangBiTe itself could read them."""
    paths = []
    for (language, via), group in templates.groupby(["language", "via"]):
        paths.append(write_langbite_file(group, Path(folder) / f"prompts_{language}--{slug(str(via))}.csv"))
    return paths


def translate_communities(communities: dict[str, dict[str, list[str]]], translator: Translator,
                          targets: list[str]) -> tuple[dict[str, dict[str, list[str]]], pd.DataFrame]:
    """Every English community list translated into the targets (entry by entry, order kept), for
    languages the library has no lists for; an entry that cannot be translated keeps its English
    form and is listed (markup, language, text, reason)."""
    out = {name: dict(lists) for name, lists in communities.items()}
    failed = []
    for target in targets:
        for name, lists in communities.items():
            if target in lists or not lists.get("en"):
                continue
            table = translator.translate_detailed(lists["en"], "en", target)
            out[name][target] = [t if t is not None else e for t, e in zip(table["translation"], lists["en"])]
            failed += [{"markup": name, "language": target, "text": e, "reason": r}
                       for t, e, r in zip(table["translation"], lists["en"], table["reason"]) if t is None]
    return out, pd.DataFrame(failed, columns=["markup", "language", "text", "reason"])
