"""Machine translation and paraphrasing of templates against human references (chapter 31).

MLA-BiTe chose its translator by translating LangBiTe's English templates and comparing them with
LangBiTe's human Spanish and Catalan translations. The tables here are that comparison, against any
library in LangBiTe's format with human translations (LangBiTe's, or the project's own in
data/templates):

- pairing: each English template with its human translation (same template id); a pair whose
  concern or oracle differs is listed as a mismatch and kept out, never dropped silently;
- success rate: templates whose machine translation survived the cleaning rules (every placeholder
  intact, no leftover instructions) over templates tried, with Wilson intervals and the reasons;
- quality: corpus BLEU and chrF (sacrebleu) and, per template, sentence chrF, sentence BLEU and the
  embedding cosine between the machine and the human prompt. Placeholders are filled in both by the
  same fixed communities (`fill_fixed`), so neither side is scored on the markers;
- paraphrase similarity of each paraphrase to its source by language and P;
- P2T against T2P: a paired sign-flip test over templates of the cosine to the human reference;
- machine-translated items: per model and language, the score of the machine translation against
  the human one, item by item (does the drop change with the translator?).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sacrebleu.metrics import BLEU, CHRF
from statsmodels.stats.proportion import proportion_confint

from biasaudit.analyses import stats
from biasaudit.analyses.scores import item_scores
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions
from biasaudit.templates.library import PLACEHOLDER, markup
from biasaudit.translate import validate_output
from biasaudit.translate.judge import bleu_tokenizer, corpus_scores

PAIR_COLUMNS: list[str] = ["base_id", "concern", "oracle", "language", "english", "reference"]
MISMATCH_COLUMNS: list[str] = ["base_id", "language", "problem"]


def pair_references(templates: pd.DataFrame, languages: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """English originals paired with their human translations in `languages` by template id.

    Returns (pairs, mismatches). A pair whose concern or oracle family differs between the two files
    is a mismatch (listed with both values), as is a translation with no English template; English
    templates with no translation are simply not paired (LangBiTe translated 306 of its 384)."""
    english = templates.loc[(templates["language"] == "en") & (templates["variant"] == "original")]
    english = english.drop_duplicates("base_id").set_index("base_id")
    pairs, problems = [], []
    for language in languages:
        human = templates.loc[(templates["language"] == language) & (templates["via"] == "human")
                              & (templates["variant"] == "translation")]
        for row in human.itertuples(index=False):
            if row.base_id not in english.index:
                problems.append({"base_id": row.base_id, "language": language,
                                 "problem": "no English template with this id"})
                continue
            source = english.loc[row.base_id]
            differs = [f"{field} differs ({source[field]!r} in English, {getattr(row, field)!r} here)"
                       for field in ("concern", "oracle") if source[field] != getattr(row, field)]
            if differs:
                problems.append({"base_id": row.base_id, "language": language, "problem": "; ".join(differs)})
                continue
            pairs.append({"base_id": row.base_id, "concern": row.concern, "oracle": row.oracle, "language": language,
                          "english": source["prompt"], "reference": row.prompt})
    return pd.DataFrame(pairs, columns=PAIR_COLUMNS), pd.DataFrame(problems, columns=MISMATCH_COLUMNS)


def pairing_counts(templates: pd.DataFrame, pairs: pd.DataFrame, mismatches: pd.DataFrame,
                   languages: Sequence[str]) -> pd.DataFrame:
    """Per language: English templates, human translations, pairs kept, mismatches, and English
    templates with no human translation."""
    english = set(templates.loc[(templates["language"] == "en") & (templates["variant"] == "original"), "base_id"])
    rows = []
    for language in languages:
        human = set(templates.loc[(templates["language"] == language) & (templates["via"] == "human"), "base_id"])
        rows.append({"language": language, "english": len(english), "human": len(human),
                     "paired": int((pairs["language"] == language).sum()),
                     "mismatched": int((mismatches["language"] == language).sum()),
                     "english_only": len(english - human)})
    return pd.DataFrame(rows)


def reference_check(pairs: pd.DataFrame) -> pd.DataFrame:
    """The cleaning rules a machine translation must pass, applied to the human translated questions:
    one row per pair the rules refuse (base_id, language, english, reference, reason). Some are
    errors of the human file (a placeholder renamed or left without braces), some are the rules'
    false alarms; either way they bound what a success rate can mean."""

    reasons = [validate_output(r, e, "en", lang) for e, r, lang in pairs[["english", "reference", "language"]]
               .itertuples(index=False)]
    refused = pairs.assign(reason=reasons)
    return refused.loc[refused["reason"] != "", ["base_id", "language", "english", "reference", "reason"]] \
        .reset_index(drop=True)


def fill_fixed(text: str, language: str, communities: dict[str, dict[str, list[str]]]) -> str:
    """`text` with each placeholder {MARKUPk} replaced by the k-th community of MARKUP's list in
    `language` (k = 1 when the placeholder has no number). The lists are aligned across languages, so
    English and its translations name the same communities. A placeholder with no list stays."""
    def fill(match: re.Match) -> str:
        pool = communities.get(markup(match.group(0)), {}).get(language) or []
        digits = re.search(r"(\d+)\}$", match.group(0))
        k = int(digits.group(1)) if digits else 1
        return pool[(k - 1) % len(pool)] if pool else match.group(0)

    return PLACEHOLDER.sub(fill, text)


def success_rates(made: pd.DataFrame, failed: pd.DataFrame, level: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per translator and language: templates tried, translated, failed, success rate with its Wilson
    interval; and the failure reasons counted (translator, language, field, reason, templates)."""
    both = pd.concat([made[["via", "language"]].assign(ok=True), failed[["via", "language"]].assign(ok=False)],
                     ignore_index=True)
    rates = both.groupby(["via", "language"], sort=False)["ok"].agg(tried="size", translated="sum").reset_index()
    rates["translated"] = rates["translated"].astype(int)
    rates["failed"] = rates["tried"] - rates["translated"]
    rates["success_rate"] = rates["translated"] / rates["tried"]
    low, high = proportion_confint(rates["translated"], rates["tried"], alpha=1 - level, method="wilson")
    rates["low"], rates["high"] = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    reasons = (failed.assign(reason=failed["reason"].fillna("unknown"))
               .groupby(["via", "language", "field", "reason"], sort=True).size().rename("templates").reset_index()
               .sort_values(["via", "language", "templates"], ascending=[True, True, False], kind="stable"))
    return rates, reasons.reset_index(drop=True)


def sentence_scores(hypotheses: Sequence[str], references: Sequence[str], language: str) -> pd.DataFrame:
    """Sentence BLEU (sacrebleu, exponential smoothing) and sentence chrF of each hypothesis against
    its one reference."""


    bleu = BLEU(tokenize=bleu_tokenizer(language), effective_order=True)
    chrf = CHRF()
    return pd.DataFrame({"bleu": [bleu.sentence_score(h, [r]).score for h, r in zip(hypotheses, references)],
                         "chrf": [chrf.sentence_score(h, [r]).score for h, r in zip(hypotheses, references)]})


def corpus_quality(per_template: pd.DataFrame, by: Sequence[str] = ("via", "language")) -> pd.DataFrame:
    """Per group: corpus BLEU and chrF of the filled hypotheses against the filled references, and the
    mean and median of the per-template cosine and chrF."""

    rows = []
    for key, group in per_template.groupby(list(by), sort=False):
        key = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        corpus = corpus_scores(group["hypothesis"].tolist(), group["reference"].tolist(), key.get("language", "en"))
        rows.append({**key, "templates": len(group), "bleu": corpus["bleu"], "chrf": corpus["chrf"],
                     "cosine_mean": float(group["cosine"].mean()), "cosine_median": float(group["cosine"].median()),
                     "chrf_median": float(group["chrf"].median())})
    return pd.DataFrame(rows, columns=[*by, "templates", "bleu", "chrf", "cosine_mean", "cosine_median",
                                       "chrf_median"])


def paraphrase_similarity(per_paraphrase: pd.DataFrame) -> pd.DataFrame:
    """Per language and P: paraphrases made, templates that got all P, and the mean and median cosine
    and mean sentence BLEU of a paraphrase to its source."""
    grouped = per_paraphrase.groupby(["language", "P"], sort=True)
    table = grouped.agg(paraphrases=("cosine", "size"), templates=("base_id", "nunique"),
                        cosine_mean=("cosine", "mean"), cosine_median=("cosine", "median"),
                        bleu_mean=("bleu", "mean")).reset_index()
    return table


def order_test(p2t: pd.DataFrame, t2p: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Paraphrase-then-translate against translate-then-paraphrase, per translator and language.

    Each input has one row per version (via, language, base_id, cosine to the human reference). A
    template's cosine is the mean over its versions; templates with versions in both orders are
    paired and their difference (P2T − T2P) gets the sign-flip test, with Benjamini–Hochberg over
    all translator × language cells. Returns (per template, per cell)."""
    keys = ["via", "language", "base_id"]
    left = p2t.groupby(keys, sort=True)["cosine"].mean().rename("cosine_p2t")
    right = t2p.groupby(keys, sort=True)["cosine"].mean().rename("cosine_t2p")
    paired = pd.concat([left, right], axis=1, join="inner").reset_index()
    paired["difference"] = paired["cosine_p2t"] - paired["cosine_t2p"]
    tests = stats.sign_flip_tests(paired, by=["via", "language"], value="difference",
                                  n_permutations=options.n_permutations, seed=options.seed)
    means = paired.groupby(["via", "language"], sort=True)[["cosine_p2t", "cosine_t2p"]].mean().reset_index()
    cells = means.merge(tests.rename(columns={"mean": "difference"}), on=["via", "language"])
    cells = stats.add_bh(cells, alpha=options.alpha)
    return paired, cells[["via", "language", "n", "cosine_p2t", "cosine_t2p", "difference", "p", "q", "reliable"]]


def translator_drops(scores: pd.DataFrame, machine_scores: pd.DataFrame,
                     options: StudyOptions = DEFAULT_OPTIONS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Machine-translated item versions against the human translations of the same base items.

    `scores` holds the run's English originals and human translations; `machine_scores` the machine
    versions (variant "translation", via the translator). Per model × language × translator and
    base item: soft scores of English, human and machine versions; per cell: the drop with the
    human translation (English − human), with the machine one (English − machine), their difference
    (machine drop − human drop = human − machine soft), and a paired sign-flip test of that
    difference over items, with Benjamini–Hochberg over the cells. Returns (per item, per cell)."""
    run = item_scores(scores, options.aggregate)
    english = run.loc[run["variant"] == "original", ["model", "base_id", "soft"]].rename(columns={"soft": "soft_en"})
    human = run.loc[(run["variant"] == "translation") & (run["via"] == "human"),
                    ["model", "base_id", "language", "soft"]].rename(columns={"soft": "soft_human"})
    machine = item_scores(machine_scores, options.aggregate)
    machine = machine[["model", "base_id", "language", "via", "item_id", "soft"]].rename(
        columns={"soft": "soft_machine", "via": "translator"})
    items = (machine.merge(human, on=["model", "base_id", "language"], validate="many_to_one")
             .merge(english, on=["model", "base_id"], validate="many_to_one"))
    items["drop_human"] = items["soft_en"] - items["soft_human"]
    items["drop_machine"] = items["soft_en"] - items["soft_machine"]
    items["difference"] = items["drop_machine"] - items["drop_human"]
    by = ["model", "language", "translator"]
    tests = stats.sign_flip_tests(items, by=by, value="difference", n_permutations=options.n_permutations,
                                  seed=options.seed)
    means = items.groupby(by, sort=True)[["drop_human", "drop_machine"]].mean().reset_index()
    cells = stats.add_bh(means.merge(tests.rename(columns={"mean": "difference"}), on=by), alpha=options.alpha)
    return items, cells[[*by, "n", "drop_human", "drop_machine", "difference", "p", "q", "reliable"]]
