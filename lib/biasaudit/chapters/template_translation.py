"""Chapter 31: which machine translator would MLA-BiTe choose? Translators and paraphrases of
LangBiTe's English templates judged against LangBiTe's human Spanish and Catalan translations, and
machine-translated items scored against the human ones."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from biasaudit import charts, judge
from biasaudit.analyses import template_translation as tx
from biasaudit.params import RunParams
from biasaudit.paths import run_dir
from biasaudit.report import Report, TableStyle, spoken_list
from biasaudit.runstore import ScoreStore, write_atomically
from biasaudit.templates import find_langbite, langbite_folder, read_langbite_library, sample_templates
from biasaudit.translate import Paraphraser, make_translator
from biasaudit.translate.languages import language_label

RATES_STYLE = TableStyle(columns={
    "via": "translator", "language": "language", "tried": "templates tried", "translated": "translated",
    "failed": "failed", "success_rate": "success rate", "low": "low", "high": "high"},
    percent=("success_rate", "low", "high"))
REASONS_STYLE = TableStyle(columns={"via": "translator", "language": "language", "field": "field",
                                    "reason": "why it failed", "templates": "templates"}, empty="")
QUALITY_STYLE = TableStyle(columns={
    "via": "translator", "language": "language", "templates": "templates", "bleu": "BLEU (corpus)",
    "chrf": "chrF (corpus)", "chrf_median": "chrF (median template)", "cosine_mean": "cosine (mean)",
    "cosine_median": "cosine (median)"}, decimals=3, empty="")
PARAPHRASE_STYLE = TableStyle(columns={
    "language": "language", "P": "P", "templates": "templates", "paraphrases": "paraphrases",
    "cosine_mean": "cosine (mean)", "cosine_median": "cosine (median)", "bleu_mean": "BLEU (mean)"}, empty="")
ORDER_STYLE = TableStyle(columns={
    "via": "translator", "language": "language", "n": "templates", "cosine_p2t": "cosine P2T",
    "cosine_t2p": "cosine T2P", "difference": "P2T − T2P", "p": "p", "q": "q", "reliable": "reliable"}, empty="")
ITEMS_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "translator": "translator", "n": "items",
    "drop_human": "drop (human translation)", "drop_machine": "drop (machine translation)",
    "difference": "machine − human drop", "p": "p", "q": "q", "reliable": "reliable"}, empty="")
NOT_HERE = "not computed: LangBiTe's templates are not on this machine (see the top of the chapter)."


@dataclass
class References:
    """LangBiTe's templates with their human translations, and the sample this run translates."""

    folder: Path
    templates: pd.DataFrame
    communities: dict
    pairs: pd.DataFrame  # English template × language with its human translation
    mismatches: pd.DataFrame
    sample: pd.DataFrame  # English originals, a seeded sample of those paired in every language


def references(params: RunParams) -> References | None:
    """LangBiTe's library from `reference_library` ("auto": already on this machine, else None)."""
    if params.reference_library == "auto":
        folder = find_langbite()
        if folder is None:
            return None
    else:
        folder = langbite_folder(params.reference_library)
    templates, communities, _ = read_langbite_library(folder, params.reference_languages)
    languages = list(params.reference_languages)
    pairs, mismatches = tx.pair_references(templates, languages)
    in_all = pairs.groupby("base_id")["language"].nunique().loc[lambda n: n == len(languages)].index
    english = templates.loc[(templates["language"] == "en") & templates["base_id"].isin(in_all)]
    sample = sample_templates(english, params.reference_templates, params.seed)
    return References(folder, templates, communities, pairs, mismatches, sample.reset_index(drop=True))


def _filled(texts, language: str, communities: dict) -> list[str]:
    return [tx.fill_fixed(t, language, communities) for t in texts]


def _similarities(left: list[str], right: list[str], language: str, embedder) -> pd.DataFrame:
    scores = tx.sentence_scores(left, right, language)
    scores["cosine"] = judge.pairwise_cosine(embedder, left, right)
    return scores


def translations(refs: References, params: RunParams, embedder) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every translator on the sample's questions: (translated, failed with the reason, per-template
    quality against the human reference with placeholders filled by the same communities).

    Only the question is translated here, the field each human translation can be compared with;
    chapter 30 translates every field of a template (task prefix, answer format, expected answers)."""
    made, failed = [], []
    for name in params.translators:
        translator = make_translator(name, batch_size=params.batch_size, device=params.device_or_none, progress=False,
                                     max_new_tokens=params.reply_tokens)
        for language in params.reference_languages:
            out = translator.translate_detailed(refs.sample["prompt"].tolist(), "en", language)
            rows = pd.DataFrame({"via": translator.name, "language": language, "base_id": refs.sample["base_id"],
                                 "field": "prompt", "text": out["text"], "prompt": out["translation"],
                                 "reason": out["reason"]})
            made.append(rows.loc[rows["prompt"].notna()])
            failed.append(rows.loc[rows["prompt"].isna()])
    made, failed = pd.concat(made, ignore_index=True), pd.concat(failed, ignore_index=True)
    quality = []
    for language, group in made.merge(refs.pairs[["base_id", "language", "reference"]],
                                      on=["base_id", "language"]).groupby("language", sort=False):
        hypotheses = _filled(group["prompt"], language, refs.communities)
        human = _filled(group["reference"], language, refs.communities)
        scores = _similarities(hypotheses, human, language, embedder)
        quality.append(pd.DataFrame({"via": group["via"].to_numpy(), "language": language,
                                     "base_id": group["base_id"].to_numpy(), "hypothesis": hypotheses,
                                     "reference": human}).join(scores))
    columns = ["via", "language", "base_id", "hypothesis", "reference", "bleu", "chrf", "cosine"]
    return made, failed, pd.concat(quality, ignore_index=True) if quality else pd.DataFrame(columns=columns)


def paraphrases(refs: References, params: RunParams, embedder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """P = 1 … max_paraphrases rewordings of each sampled template (a request for P at a time) in
    English and in each reference language (of the human translation), each judged against its
    source: (one row per paraphrase, templates that got fewer than P with the reason)."""
    sources = [("en", refs.sample["base_id"], refs.sample["prompt"])]
    for language in params.reference_languages:
        chosen = refs.pairs.loc[(refs.pairs["language"] == language) & refs.pairs["base_id"].isin(refs.sample["base_id"])]
        sources.append((language, chosen["base_id"], chosen["reference"]))
    rows, short = [], []
    for p in range(1, params.max_paraphrases + 1):
        paraphraser = Paraphraser(params.paraphraser, n=p, batch_size=params.batch_size, device=params.device_or_none,
                                  max_new_tokens=params.reply_tokens, progress=False)
        for language, ids, texts in sources:
            table = paraphraser.paraphrase_detailed(texts.tolist(), language)
            for base_id, text, rewordings, reason in zip(ids, texts, table["rewordings"], table["reason"]):
                rows += [{"language": language, "P": p, "k": k, "base_id": base_id, "source": text, "paraphrase": r}
                         for k, r in enumerate(rewordings, start=1)]
                if len(rewordings) < p:
                    short.append({"language": language, "P": p, "base_id": base_id, "made": len(rewordings),
                                  "reason": reason or "fewer rewordings than asked"})
    table = pd.DataFrame(rows, columns=["language", "P", "k", "base_id", "source", "paraphrase"])
    scored = []
    for language, group in table.groupby("language", sort=False):
        left = _filled(group["paraphrase"], language, refs.communities)
        right = _filled(group["source"], language, refs.communities)
        scored.append(group.reset_index(drop=True).join(_similarities(left, right, language, embedder)))
    out = pd.concat(scored, ignore_index=True) if scored else table.assign(bleu=[], chrf=[], cosine=[])
    return out, pd.DataFrame(short, columns=["language", "P", "base_id", "made", "reason"])


def orders(refs: References, params: RunParams, made: pd.DataFrame, english_paraphrases: pd.DataFrame,
           embedder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """P2T (the English paraphrases, translated) and T2P (the translations, paraphrased in the target
    language), each version's cosine to the human reference: (P2T rows, T2P rows)."""
    paraphraser = Paraphraser(params.paraphraser, n=params.n_paraphrases, batch_size=params.batch_size,
                              device=params.device_or_none, max_new_tokens=params.reply_tokens, progress=False)
    p2t, t2p = [], []
    for name in params.translators:
        translator = make_translator(name, batch_size=params.batch_size, device=params.device_or_none, progress=False,
                                     max_new_tokens=params.reply_tokens)
        for language in params.reference_languages:
            out = translator.translate_detailed(english_paraphrases["paraphrase"].tolist(), "en", language)
            p2t.append(pd.DataFrame({"via": translator.name, "language": language,
                                     "base_id": english_paraphrases["base_id"].to_numpy(),
                                     "version": out["translation"].to_numpy()}))
            mine = made.loc[(made["via"] == translator.name) & (made["language"] == language)]
            table = paraphraser.paraphrase_detailed(mine["prompt"].tolist(), language)
            t2p.append(pd.DataFrame([{"via": translator.name, "language": language, "base_id": b, "version": r}
                                     for b, rewordings in zip(mine["base_id"], table["rewordings"])
                                     for r in rewordings], columns=["via", "language", "base_id", "version"]))

    def judged(frames: list[pd.DataFrame]) -> pd.DataFrame:
        table = pd.concat(frames, ignore_index=True).dropna(subset=["version"])
        table = table.merge(refs.pairs[["base_id", "language", "reference"]], on=["base_id", "language"])
        parts = []
        for language, group in table.groupby("language", sort=False):
            left = _filled(group["version"], language, refs.communities)
            right = _filled(group["reference"], language, refs.communities)
            parts.append(group.assign(cosine=judge.pairwise_cosine(embedder, left, right)))
        return pd.concat(parts, ignore_index=True) if parts else table.assign(cosine=[])

    return judged(p2t), judged(t2p)


def machine_items(params: RunParams) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Chapter 01's machine translations of the bank, scored by the run's models and compared with
    the human translations item by item: (per item, per cell, what was done)."""
    from biasaudit import pipeline
    from biasaudit.scoring import score

    path = run_dir(params.run_name) / "machine_translations.parquet"
    if params.released_scores:
        return pd.DataFrame(), pd.DataFrame(), ("This run imports the paper's released scores, so there is no model "
                                                "here to score machine translations with.")
    if not path.exists():
        return pd.DataFrame(), pd.DataFrame(), (f"This run has no machine translations of its items yet ({path.name} "
                                                "is written by chapter 01); run it first.")
    machine = pd.read_parquet(path)
    scores = pipeline.read_scores(params.run_name, models=list(params.models) or None)
    machine = machine.loc[machine["base_id"].isin(scores["base_id"])]
    if machine.empty:
        return pd.DataFrame(), pd.DataFrame(), "None of the machine-translated items is among the run's scored items."
    store = ScoreStore(run_dir(params.run_name) / "machine_items")
    scored = pd.concat([score(machine, model, batch_size=params.batch_size, device=params.device_or_none,
                              store=store, progress=False) for model in sorted(scores["model"].unique())],
                       ignore_index=True)
    items, cells = tx.translator_drops(scores, scored, params.options)
    return items, cells, ""


def report(params: RunParams) -> Report:
    """Translators and paraphrases against LangBiTe's human references; machine-translated items scored."""
    out = Report()
    languages = list(params.reference_languages)
    out.values.update({"translators": spoken_list(list(params.translators)) or "none",
                       "paraphraser": params.paraphraser, "languages": spoken_list([language_label(c) for c in languages]),
                       "max_paraphrases": params.max_paraphrases, "n_paraphrases": params.n_paraphrases,
                       "reference_templates": params.reference_templates, "reply_tokens": params.reply_tokens})
    items, cells, items_text = machine_items(params)
    out.add_table("item_cells", cells, ITEMS_STYLE)
    out.values["items_text"] = items_text or _items_text(cells, items)
    refs = references(params)
    if refs is None:
        return _without_library(out)
    out.values["library_text"] = f"LangBiTe's templates were read from {refs.folder}."
    counts = tx.pairing_counts(refs.templates, refs.pairs, refs.mismatches, languages)
    out.add_table("pairing", counts, TableStyle(columns={
        "language": "language", "english": "English templates", "human": "human translations", "paired": "paired",
        "mismatched": "mismatched (listed below)", "english_only": "English only"}))
    out.add_table("mismatches", refs.mismatches, TableStyle(columns={"base_id": "template", "language": "language",
                                                                      "problem": "problem"}, empty=""))
    refused = tx.reference_check(refs.pairs)
    out.add_table("refused", refused, TableStyle(columns={
        "base_id": "template", "language": "language", "english": "English", "reference": "human translation",
        "reason": "why the rules refuse it"}, empty=""))
    out.values["refused_text"] = _refused_text(refused, refs.pairs, languages)
    out.values.update({"n_english": int(counts["english"].iloc[0]), "n_sample": len(refs.sample),
                       "n_concerns": int(refs.sample["concern"].nunique()),
                       "mismatch_text": (f"{len(refs.mismatches)} translation(s) do not match their English template "
                                         "and are listed here; they are left out:" if len(refs.mismatches) else
                                         "Every human translation has the same concern and oracle as its English "
                                         "template, so no pair is left out for a mismatch.")})

    embedder = judge.load_embedder(params.embedder)
    out.values["embedder"] = embedder.name
    made, failed, quality = translations(refs, params, embedder)
    folder = run_dir(params.run_name) / "template_translation"
    for name, table in (("translations", made), ("failed", failed), ("quality", quality)):
        write_atomically(table, folder / f"{name}.parquet")
    rates, reasons = tx.success_rates(made, failed, params.level)
    out.add_table("rates", rates, RATES_STYLE)
    out.add_table("reasons", reasons, REASONS_STYLE)
    out.values["success_text"] = _success_text(rates, reasons)
    corpus = tx.corpus_quality(quality)
    out.add_table("quality", corpus, QUALITY_STYLE)
    out.values["quality_text"] = _quality_text(corpus)
    long = pd.concat([quality.assign(metric="cosine", value=quality["cosine"]),
                      quality.assign(metric="chrF / 100", value=quality["chrf"] / 100)], ignore_index=True)
    long["group"] = long["via"] + " · " + long["language"]
    out.figures["quality"] = charts.metric_boxes(
        long, "value", box="group", row="metric", x_title="against the human translation",
        title="Per template: machine against human translation (placeholders filled alike)") if len(long) else None
    examples = quality.sort_values("cosine", kind="stable").groupby(["via", "language"], sort=False).head(2)
    out.add_table("examples", examples, TableStyle(columns={
        "via": "translator", "language": "language", "hypothesis": "machine", "reference": "human",
        "chrf": "chrF", "cosine": "cosine"}, empty=""))

    para, short = paraphrases(refs, params, embedder)
    write_atomically(para, folder / "paraphrases.parquet")
    by_p = tx.paraphrase_similarity(para) if len(para) else pd.DataFrame()
    out.add_table("paraphrases", by_p, PARAPHRASE_STYLE)
    out.values["paraphrase_text"] = _paraphrase_text(by_p, short, len(refs.sample), languages)
    out.figures["paraphrases"] = charts.metric_boxes(
        para.assign(P=para["P"].astype(str)), "cosine", box="P", row="language", row_order=["en", *languages],
        x_title="cosine to the source template", title="Paraphrases by P (a request for P at a time)"
    ) if len(para) else None

    english = para.loc[(para["language"] == "en") & (para["P"] == params.n_paraphrases)]
    p2t, t2p = orders(refs, params, made, english, embedder)
    paired, order_cells = tx.order_test(p2t, t2p, params.options)
    out.add_table("orders", order_cells, ORDER_STYLE)
    out.values["order_text"] = _order_text(order_cells, params.alpha)
    both = pd.concat([p2t.assign(order="P2T"), t2p.assign(order="T2P")], ignore_index=True)
    both["group"] = both["via"] + " · " + both["order"]
    out.figures["orders"] = charts.metric_boxes(
        both, "cosine", box="group", row="language", row_order=languages, x_title="cosine to the human translation",
        title="Paraphrase then translate (P2T) against translate then paraphrase (T2P)") if len(both) else None
    out.values["best_text"] = _best_text(rates, corpus, languages)
    return out


def _without_library(out: Report) -> Report:
    out.values.update({"library_text": ("LangBiTe's templates are not on this machine (no download was made: the "
                                        "default run stays offline). Set reference_library: download (pinned "
                                        "files, sha256-checked), or point it at a folder of LangBiTe's files, to "
                                        "compute this chapter; every table below is empty in this run."),
                       "n_english": 0, "n_sample": 0, "n_concerns": 0, "embedder": "none", "mismatch_text": "",
                       "refused_text": "",
                       "success_text": NOT_HERE, "quality_text": NOT_HERE, "paraphrase_text": NOT_HERE,
                       "order_text": NOT_HERE, "best_text": NOT_HERE})
    for name in ("pairing", "mismatches", "refused", "rates", "reasons", "quality", "examples", "paraphrases", "orders"):
        out.add_table(name, pd.DataFrame(), TableStyle(empty=""))
    out.figures.update({"quality": None, "paraphrases": None, "orders": None})
    return out


def _refused_text(refused: pd.DataFrame, pairs: pd.DataFrame, languages: list[str]) -> str:
    if refused.empty:
        return "The cleaning rules accept every human translated question, so they refuse no correct translation here."
    counts = [f"{int((refused['language'] == lang).sum())} of {int((pairs['language'] == lang).sum())} in "
              f"{language_label(lang)}" for lang in languages]
    top = refused["reason"].value_counts()
    return (f"The same rules, applied to the human translated questions, refuse {spoken_list(counts)}; most often "
            f"because: {top.index[0]} ({int(top.iloc[0])}). These are listed below: where the human file itself is "
            "wrong (a placeholder renamed or written without braces) the rules are right, elsewhere they are false "
            "alarms, and a machine's success rate is only as exact as they are.")


def _success_text(rates: pd.DataFrame, reasons: pd.DataFrame) -> str:
    parts = [f"{row.via} translated {row.translated} of {row.tried} templates into {language_label(row.language)} "
             f"({row.success_rate:.0%})" for row in rates.itertuples(index=False)]
    text = spoken_list(parts) + "."
    if len(reasons):
        top = reasons.groupby("reason")["templates"].sum().sort_values(ascending=False, kind="stable")
        text += f" The most common reason a translation was refused: {top.index[0]} ({int(top.iloc[0])} templates)."
    return text


def _quality_text(corpus: pd.DataFrame) -> str:
    if corpus.empty:
        return "No translation survived cleaning, so there is nothing to compare with the human references."
    best = corpus.loc[corpus["cosine_median"].idxmax()]
    worst = corpus.loc[corpus["cosine_median"].idxmin()]
    if len(corpus) == 1:
        return (f"Only {best['via']} into {language_label(best['language'])} made usable translations here: median "
                f"cosine to the human translation {best['cosine_median']:.2f}, corpus chrF {best['chrf']:.1f}, "
                f"BLEU {best['bleu']:.1f}, over {int(best['templates'])} templates.")
    return (f"The median cosine to the human translation runs from {worst['cosine_median']:.2f} "
            f"({worst['via']}, {language_label(worst['language'])}) to {best['cosine_median']:.2f} ({best['via']}, "
            f"{language_label(best['language'])}); corpus chrF from {corpus['chrf'].min():.1f} to "
            f"{corpus['chrf'].max():.1f} and BLEU from {corpus['bleu'].min():.1f} to {corpus['bleu'].max():.1f}.")


def _paraphrase_text(by_p: pd.DataFrame, short: pd.DataFrame, n_templates: int, languages: list[str]) -> str:
    if by_p.empty:
        why = f" (most often: {short['reason'].value_counts().index[0]})" if len(short) else ""
        return f"The paraphraser made no usable paraphrase{why}."
    first = by_p.loc[by_p["P"] == by_p["P"].min()].set_index("language")["cosine_mean"]
    last = by_p.loc[by_p["P"] == by_p["P"].max()].set_index("language")["cosine_mean"]
    moves = [f"{language_label(lang)} {first[lang]:.2f} → {last[lang]:.2f}" for lang in ["en", *languages]
             if lang in first.index and lang in last.index]
    text = (f"Mean cosine of a paraphrase to its source, from the smallest to the largest P: {spoken_list(moves)}.")
    if len(short):
        text += (f" {len(short)} requests (template × language × P) got fewer paraphrases than asked, most often "
                 f"because: {short['reason'].value_counts().index[0]}.")
    return text


def _order_text(cells: pd.DataFrame, alpha: float) -> str:
    if cells.empty:
        return "No template has versions in both orders, so the two orders cannot be compared here."
    parts = []
    for row in cells.itertuples(index=False):
        better = "P2T" if row.difference > 0 else "T2P"
        verdict = "a reliable difference" if row.reliable else f"not a reliable difference (q ≥ {alpha:g})"
        parts.append(f"{row.via} into {language_label(row.language)}: {better} closer by {abs(row.difference):.3f} "
                     f"over {row.n} templates, {verdict}")
    return spoken_list(parts, "; and") + "."


def _best_text(rates: pd.DataFrame, corpus: pd.DataFrame, languages: list[str]) -> str:
    if corpus.empty:
        return "No translator of this run made a usable translation, so none can be recommended from it."
    mean = corpus.groupby("via")["cosine_median"].mean().sort_values(ascending=False, kind="stable")
    best = mean.index[0]
    success = rates.loc[rates["via"] == best, "success_rate"].mean()
    return (f"Of this run's translators, {best} comes closest to the human translations (mean of the median "
            f"cosines {mean.iloc[0]:.2f}, success rate {success:.0%}). Chapter 30 asks its translations instead of "
            f"the human ones with the parameters template_library: langbite, template_translator: {best}, "
            f"template_translations: machine and languages: [{', '.join(languages)}].")


def _items_text(cells: pd.DataFrame, items: pd.DataFrame) -> str:
    if cells.empty:
        return "No machine-translated item could be paired with a human translation and the English original."
    largest = cells.loc[cells["difference"].abs().idxmax()]
    reliable = int(cells["reliable"].sum())
    return (f"{items['base_id'].nunique()} items were machine-translated by chapter 01 "
            f"({spoken_list(sorted(items['translator'].unique()))}). Across {len(cells)} model × language cells the "
            f"drop changes by at most {abs(largest['difference']):.3f} when the human translation is swapped for "
            f"the machine one ({largest['model']}, {language_label(largest['language'])}); {reliable} of the "
            f"changes are reliable after Benjamini–Hochberg. With so few items a test can detect only large changes.")
