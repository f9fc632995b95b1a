"""Chapter 31's measurements: which human reference the run compares against, translators' and
paraphrasers' versions of the English templates judged against it, the paraphrase orders, and
machine-translated template items scored against human-translated ones; `run_comparison` is the
step that makes and stores them all (runs/<run>/steps/template_translation/). The chapter
(`biasaudit.book.chapters.template_translation`) formats what these return."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import pandas as pd

from biasaudit.core.paths import PROJECT_ROOT, run_dir
from biasaudit.core.store import ScoreStore
from biasaudit.run import pipeline
from biasaudit.run.engine import RayOptions
from biasaudit.run.params import RunParams
from biasaudit.run.steps import StepTables, write_step
from biasaudit.templates import translators as tx
from biasaudit.templates.library import (
    LANGBITE_LANGUAGES,
    PROJECT_LIBRARY,
    find_langbite,
    langbite_folder,
    read_langbite_library,
    read_project_library,
    sample_templates,
)
from biasaudit.translate import Paraphraser, judge, make_translator

Source = Literal["langbite", "project"]
# LangBiTe's human translations: every language of its library but English.
LANGBITE_REFERENCES: list[str] = [code for code in LANGBITE_LANGUAGES.values() if code != "en"]


# --- which human reference, in which languages ----------------------------------------------------


@dataclass(frozen=True)
class ReferenceChoice:
    """Which library is the human reference, and in which of its languages this run compares."""

    source: Source
    folder: Path
    languages: list[str]  # the reference languages compared in (may be empty: nothing to compare)
    chosen_from: str  # "reference_languages", "languages" (the run's, as a fallback), or "" (neither)
    asked: list[str]  # the run's reference_languages
    run_languages: list[str]  # the run's languages
    available: list[str]  # the library's languages besides English
    fell_back: bool  # reference_library "auto" found no LangBiTe files and took the project's library

    @property
    def shown_folder(self) -> str:
        """The folder as the page names it: relative to the project when it is inside it."""
        try:
            return self.folder.resolve().relative_to(PROJECT_ROOT.resolve()).as_posix()
        except ValueError:
            return str(self.folder)



def _chat_options(params: RunParams) -> dict:
    """How chapter 31's translators and paraphrasers run: the run's device, precision, reply budget and
    executor (with `executor: ray` their conversations are split over Ray actors)."""
    return {"batch_size": params.batch_size, "device": params.device_or_none, "dtype": params.generation_dtype,
            "max_new_tokens": params.reply_tokens, "progress": False, "executor": RayOptions.from_params(params)}

def library_languages(folder: Path = PROJECT_LIBRARY) -> list[str]:
    """The languages besides English that a project-format library has a templates_<lang>.tsv for."""
    return sorted(path.stem.removeprefix("templates_") for path in folder.glob("templates_*.tsv")
                  if path.stem != "templates_en")


def choose_languages(available: Sequence[str], reference_languages: Sequence[str],
                     run_languages: Sequence[str]) -> tuple[list[str], str]:
    """The languages to compare in, and the list they came from: those of `reference_languages` the
    library has; if none, those of the run's `languages` it has (so the project's library, which has
    no Catalan, is still compared where the run asks models); if neither, none ("")."""
    for name, wanted in (("reference_languages", reference_languages), ("languages", run_languages)):
        chosen = [code for code in dict.fromkeys(wanted) if code in available and code != "en"]
        if chosen:
            return chosen, name
    return [], ""


def choose_reference(params: RunParams) -> ReferenceChoice:
    """The reference library of `reference_library`: "auto" takes LangBiTe's files when they are
    already on this machine (never downloading) and the project's library otherwise; "project" the
    project's; "download" or a folder LangBiTe's."""
    found = None
    if params.reference_library == "auto":
        found = find_langbite()
    if params.reference_library == "project" or (params.reference_library == "auto" and found is None):
        source: Source = "project"
        folder, available = PROJECT_LIBRARY, library_languages(PROJECT_LIBRARY)
    else:
        source = "langbite"
        folder = found if found is not None else langbite_folder(params.reference_library)
        available = list(LANGBITE_REFERENCES)
    languages, chosen_from = choose_languages(available, params.reference_languages, params.languages)
    return ReferenceChoice(source, Path(folder), languages, chosen_from, list(params.reference_languages),
                           list(params.languages), available,
                           fell_back=params.reference_library == "auto" and source == "project")


@dataclass
class References:
    """The human reference library with its translations, and the sample this run translates."""

    choice: ReferenceChoice
    templates: pd.DataFrame
    communities: dict
    pairs: pd.DataFrame  # English template × language with its human translation
    mismatches: pd.DataFrame
    sample: pd.DataFrame  # English originals, a seeded sample of those paired in every language

    @property
    def languages(self) -> list[str]:
        return self.choice.languages


def references(params: RunParams) -> References:
    """The chosen library read in the chosen languages, paired, and sampled (`reference_templates`
    per concern, seeded) among the English templates with a human translation in every one."""
    choice = choose_reference(params)
    languages = choice.languages
    if choice.source == "project":
        templates, communities = read_project_library(languages, choice.folder, paraphrases=False)
    else:
        templates, communities, _ = read_langbite_library(choice.folder, languages)
    pairs, mismatches = tx.pair_references(templates, languages)
    if languages:
        in_all = pairs.groupby("base_id")["language"].nunique().loc[lambda n: n == len(languages)].index
    else:
        in_all = pd.Index([])
    english = templates.loc[(templates["language"] == "en") & (templates["variant"] == "original")
                            & templates["base_id"].isin(in_all)]
    sample = sample_templates(english, params.reference_templates, params.seed)
    return References(choice, templates, communities, pairs, mismatches, sample.reset_index(drop=True))


# --- the measurements ------------------------------------------------------------------------------


def _filled(texts, language: str, communities: dict) -> list[str]:
    return [tx.fill_fixed(t, language, communities) for t in texts]


def _similarities(left: list[str], right: list[str], language: str, embedder) -> pd.DataFrame:
    scores = tx.sentence_scores(left, right, language)
    scores["cosine"] = judge.pairwise_cosine(embedder, left, right)
    return scores


TRANSLATION_COLUMNS: list[str] = ["via", "language", "base_id", "field", "text", "prompt", "reason"]
QUALITY_COLUMNS: list[str] = ["via", "language", "base_id", "hypothesis", "reference", "bleu", "chrf", "cosine"]


def translations(refs: References, params: RunParams, embedder) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every translator on the sample's questions: (translated, failed with the reason, per-template
    quality against the human reference with placeholders filled by the same communities).

    Only the question is translated here, the field each human translation can be compared with;
    chapter 30 translates every field of a template (task prefix, answer format, expected answers)."""
    made, failed = [pd.DataFrame(columns=TRANSLATION_COLUMNS)], [pd.DataFrame(columns=TRANSLATION_COLUMNS)]
    for name in params.translators:
        translator = make_translator(name, **_chat_options(params))
        for language in refs.languages:
            out = translator.translate_detailed(refs.sample["prompt"].tolist(), "en", language)
            rows = pd.DataFrame({"via": translator.name, "language": language, "base_id": refs.sample["base_id"],
                                 "field": "prompt", "text": out["text"], "prompt": out["translation"],
                                 "reason": out["reason"]})
            made.append(rows.loc[rows["prompt"].notna()])
            failed.append(rows.loc[rows["prompt"].isna()])
    made = pd.concat([m for m in made if len(m)] or made[:1], ignore_index=True)
    failed = pd.concat([f for f in failed if len(f)] or failed[:1], ignore_index=True)
    quality = []
    for language, group in made.merge(refs.pairs[["base_id", "language", "reference"]],
                                      on=["base_id", "language"]).groupby("language", sort=False):
        hypotheses = _filled(group["prompt"], language, refs.communities)
        human = _filled(group["reference"], language, refs.communities)
        scores = _similarities(hypotheses, human, language, embedder)
        quality.append(pd.DataFrame({"via": group["via"].to_numpy(), "language": language,
                                     "base_id": group["base_id"].to_numpy(), "hypothesis": hypotheses,
                                     "reference": human}).join(scores))
    return made, failed, pd.concat(quality, ignore_index=True) if quality else pd.DataFrame(columns=QUALITY_COLUMNS)


def paraphrases(refs: References, params: RunParams, embedder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """P = 1 … max_paraphrases rewordings of each sampled template (a request for P at a time) in
    English and in each reference language (of the human translation), each judged against its
    source: (one row per paraphrase, templates that got fewer than P with the reason)."""
    sources = [("en", refs.sample["base_id"], refs.sample["prompt"])]
    for language in refs.languages:
        chosen = refs.pairs.loc[(refs.pairs["language"] == language)
                                & refs.pairs["base_id"].isin(refs.sample["base_id"])]
        sources.append((language, chosen["base_id"], chosen["reference"]))
    rows, short = [], []
    for p in range(1, params.max_paraphrases + 1):
        paraphraser = Paraphraser(params.paraphraser, n=p, **_chat_options(params))
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


def english_versions(refs: References, params: RunParams, para: pd.DataFrame) -> pd.DataFrame:
    """The English paraphrases P2T translates: those of P = n_paraphrases from the paraphrase
    section, or, when max_paraphrases stops below n_paraphrases, a request for n_paraphrases of them."""
    if params.n_paraphrases <= params.max_paraphrases:
        return para.loc[(para["language"] == "en") & (para["P"] == params.n_paraphrases), ["base_id", "paraphrase"]]
    paraphraser = Paraphraser(params.paraphraser, n=params.n_paraphrases, **_chat_options(params))
    table = paraphraser.paraphrase_detailed(refs.sample["prompt"].tolist(), "en")
    return pd.DataFrame([{"base_id": b, "paraphrase": r} for b, rewordings in zip(refs.sample["base_id"],
                                                                                 table["rewordings"])
                         for r in rewordings], columns=["base_id", "paraphrase"])


def orders(refs: References, params: RunParams, made: pd.DataFrame, english_paraphrases: pd.DataFrame,
           embedder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """P2T (the English paraphrases, translated) and T2P (the translations, paraphrased in the target
    language), each version's cosine to the human reference: (P2T rows, T2P rows)."""
    paraphraser = Paraphraser(params.paraphraser, n=params.n_paraphrases, **_chat_options(params))
    columns = ["via", "language", "base_id", "version"]
    p2t, t2p = [pd.DataFrame(columns=columns)], [pd.DataFrame(columns=columns)]
    for name in params.translators:
        translator = make_translator(name, **_chat_options(params))
        for language in refs.languages:
            out = translator.translate_detailed(english_paraphrases["paraphrase"].tolist(), "en", language)
            p2t.append(pd.DataFrame({"via": translator.name, "language": language,
                                     "base_id": english_paraphrases["base_id"].to_numpy(),
                                     "version": out["translation"].to_numpy()}))
            mine = made.loc[(made["via"] == translator.name) & (made["language"] == language)]
            table = paraphraser.paraphrase_detailed(mine["prompt"].tolist(), language)
            t2p.append(pd.DataFrame([{"via": translator.name, "language": language, "base_id": b, "version": r}
                                     for b, rewordings in zip(mine["base_id"], table["rewordings"])
                                     for r in rewordings], columns=columns))

    def judged(frames: list[pd.DataFrame]) -> pd.DataFrame:
        table = pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True).dropna(subset=["version"])
        table = table.merge(refs.pairs[["base_id", "language", "reference"]], on=["base_id", "language"])
        parts = []
        for language, group in table.groupby("language", sort=False):
            left = _filled(group["version"], language, refs.communities)
            right = _filled(group["reference"], language, refs.communities)
            parts.append(group.assign(cosine=judge.pairwise_cosine(embedder, left, right)))
        return pd.concat(parts, ignore_index=True) if parts else table.assign(cosine=pd.Series(dtype=float))

    return judged(p2t), judged(t2p)


def machine_items(params: RunParams) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Chapter 01's machine translations of the bank, scored by the run's models and compared with
    the human translations item by item: (per item, per cell, what was done)."""
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
    scored = pd.concat([pipeline.scores_of(machine, model, store, batch_size=params.batch_size,
                                           device=params.device_or_none, progress=False)
                        for model in sorted(scores["model"].unique())], ignore_index=True)
    items, cells = tx.translator_drops(scores, scored, params.options)
    return items, cells, ""




# --- the step --------------------------------------------------------------------------------------


def run_comparison(params: RunParams) -> StepTables:
    """Score chapter 01's machine-translated items, translate and paraphrase the sampled templates,
    judge them against the human reference; write every table (`run.steps`)."""
    refs = references(params)
    items, cells, items_note = machine_items(params)
    tables = {"machine_items": items, "item_cells": cells}
    values = {"items_note": items_note, "embedder": params.embedder}
    if refs.languages and not refs.sample.empty:
        embedder = judge.load_embedder(params.embedder)
        values["embedder"] = embedder.name
        made, failed, quality = translations(refs, params, embedder)
        para, short = paraphrases(refs, params, embedder)
        p2t, t2p = orders(refs, params, made, english_versions(refs, params, para), embedder)
        tables.update({"translations": made, "failed": failed, "quality": quality, "paraphrases": para,
                       "short": short, "p2t": p2t, "t2p": t2p})
    made_tables = StepTables(tables, values)
    write_step(params, "template_translation", made_tables)
    return made_tables
