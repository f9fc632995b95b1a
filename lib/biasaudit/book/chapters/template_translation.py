"""Chapter 31: which machine translator would MLA-BiTe choose? Translators and paraphrases of
English templates judged against human translations of them, and machine-translated items scored
against the human ones.

The human reference is LangBiTe's library (its human Spanish and Catalan, MLA-BiTe's own reference)
when it is on this machine or asked for, else the project's own library in data/templates (human
translations in seven languages), so that an offline run on a fresh machine still has numbers.
Every sentence the page shows that depends on the run is built by a function here (tested on its
edge cases: nothing, a single value, ties)."""

from __future__ import annotations

import re

import pandas as pd

from biasaudit.book import charts
from biasaudit.book.prose import (
    count_noun,
    language_names,
    magnitude,
    reasons_sentence,
    spoken_clauses,
    spoken_list,
    value_range,
)
from biasaudit.book.report import Report, TableStyle
from biasaudit.data.languages import language_label
from biasaudit.lm.registry import OFFLINE_MODELS
from biasaudit.run.params import RunParams
from biasaudit.run.steps import read_step
from biasaudit.templates import translators as tx
from biasaudit.templates.comparison import ReferenceChoice, Source, references

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
    "drop_human": "drop, human", "drop_machine": "drop, machine", "difference": "machine − human", "p": "p",
    "q": "q", "reliable": "reliable"}, empty="")
PAIRING_STYLE = TableStyle(columns={
    "language": "language", "english": "English templates", "human": "human translations", "paired": "paired",
    "mismatched": "mismatched (listed below)", "english_only": "English only"}, empty="")
MISMATCH_STYLE = TableStyle(columns={"base_id": "template", "language": "language", "problem": "problem"}, empty="")
REFUSED_STYLE = TableStyle(columns={
    "base_id": "template", "language": "language", "english": "English", "reference": "human translation",
    "reason": "why the rules refuse it"}, empty="")
EXAMPLES_STYLE = TableStyle(columns={
    "via": "translator", "language": "language", "hypothesis": "machine", "reference": "human",
    "chrf": "chrF", "cosine": "cosine"}, empty="",
    caption="The templates furthest from the human translation, per translator and language (at most two each).")


# --- the chapter -----------------------------------------------------------------------------------



def planned_values(params: RunParams) -> dict[str, int]:
    """What this chapter counts for a run of `params` before any translator writes a word (exercise 1):
    the sampled templates and the translations asked for (templates × reference languages × translators)."""
    refs = references(params)
    return {"n_sample": len(refs.sample), "n_asked": len(refs.sample) * len(refs.languages) * len(params.translators)}


def report(params: RunParams) -> Report:
    """Translators and paraphrases against the human reference; machine-translated items scored:
    read from the tables of the run's step (`templates.comparison.run_comparison`)."""
    step = read_step(params, "template_translation")
    out = Report()
    refs = references(params)
    languages = refs.languages
    out.values.update({
        "run_text": run_text(list(params.translators), params.paraphraser, languages),
        "parameters_text": parameters_text(params.reference_templates, params.max_paraphrases, params.reply_tokens),
        "reply_tokens": params.reply_tokens, "library_text": library_text(refs.choice),
        "reference_summary": reference_summary(refs.choice),
        "paraphrase_method_text": paraphrase_method_text(params.max_paraphrases, languages),
        "versions_text": versions_text(params.n_paraphrases), "embedder": params.embedder})
    items, cells, items_note = step["machine_items"], step["item_cells"], step.values["items_note"]
    out.add_table("item_cells", cells, ITEMS_STYLE)
    out.values["items_text"] = items_note or items_text(cells, items)

    counts = tx.pairing_counts(refs.templates, refs.pairs, refs.mismatches, languages)
    out.add_table("pairing", counts, PAIRING_STYLE)
    out.add_table("mismatches", refs.mismatches, MISMATCH_STYLE)
    refused = tx.reference_check(refs.pairs)
    out.add_table("refused", refused, REFUSED_STYLE)
    n_concerns = int(refs.sample["concern"].nunique()) if len(refs.sample) else 0
    n_english = int(((refs.templates["language"] == "en") & (refs.templates["variant"] == "original")).sum())
    out.values.update({"n_english": n_english, "n_sample": len(refs.sample), "n_concerns": n_concerns,
                       "reference_text": reference_text(counts, len(refs.sample), n_concerns, languages),
                       "mismatch_text": mismatch_text(refs.mismatches) if languages else "",
                       "refused_text": refused_text(refused, refs.pairs, languages) if languages else ""})
    if not languages:
        return _nothing_to_compare(out, "there is no reference language (see the human reference above)")
    if refs.sample.empty:
        return _nothing_to_compare(out, "no English template has a human translation in every reference language")

    out.values["embedder"] = step.values["embedder"]
    made, failed, quality = step["translations"], step["failed"], step["quality"]
    out.values["n_asked"] = len(made) + len(failed)  # one row per template, language and translator
    rates, reasons = tx.success_rates(made, failed, params.level)
    out.add_table("rates", rates, RATES_STYLE)
    out.add_table("reasons", reasons, REASONS_STYLE)
    out.values["success_text"] = success_text(rates, reasons, list(params.translators))
    corpus = tx.corpus_quality(quality)
    out.add_table("quality", corpus, QUALITY_STYLE)
    out.values["quality_text"] = quality_text(corpus)
    long = pd.concat([quality.assign(metric="cosine", value=quality["cosine"]),
                      quality.assign(metric="chrF / 100", value=quality["chrf"] / 100)], ignore_index=True)
    long["group"] = long["via"] + " · " + long["language"]
    out.figures["quality"] = charts.metric_boxes(
        long, "value", box="group", row="metric", x_title="against the human translation",
        title="Per template: machine against human translation (placeholders filled alike)") if len(long) else None
    examples = quality.sort_values("cosine", kind="stable").groupby(["via", "language"], sort=False).head(2)
    out.add_table("examples", examples, EXAMPLES_STYLE)

    para, short = step["paraphrases"], step["short"]
    by_p = tx.paraphrase_similarity(para) if len(para) else pd.DataFrame()
    out.add_table("paraphrases", by_p, PARAPHRASE_STYLE)
    out.values["paraphrase_text"] = paraphrase_text(by_p, short, languages)
    out.figures["paraphrases"] = charts.metric_boxes(
        para.assign(P=para["P"].astype(str)), "cosine", box="P", row="language", row_order=["en", *languages],
        x_title="cosine to the source template", title="Paraphrases by P (a request for P at a time)"
    ) if len(para) else None

    p2t, t2p = step["p2t"], step["t2p"]
    paired, order_cells = tx.order_test(p2t, t2p, params.options)
    out.add_table("orders", order_cells, ORDER_STYLE)
    out.values["order_text"] = order_text(order_cells, params.alpha)
    out.values["order_summary"] = order_summary(order_cells)
    both = pd.concat([p2t.assign(order="P2T"), t2p.assign(order="T2P")], ignore_index=True)
    both["group"] = both["via"] + " · " + both["order"]
    out.figures["orders"] = charts.metric_boxes(
        both, "cosine", box="group", row="language", row_order=languages, x_title="cosine to the human translation",
        title="Paraphrase then translate (P2T) against translate then paraphrase (T2P)") if len(both) else None
    out.values["best_text"] = best_text(rates, corpus, languages, refs.choice.source, list(params.translators))
    return out


def _nothing_to_compare(out: Report, why: str) -> Report:
    """Every result section empty, each saying why in one sentence."""
    text = not_computed(why)
    out.values.update({"success_text": text, "quality_text": text, "paraphrase_text": text, "order_text": text,
                       "best_text": text, "order_summary": text})
    for name in ("rates", "reasons", "quality", "examples", "paraphrases", "orders"):
        out.add_table(name, pd.DataFrame(), TableStyle(empty=""))
    out.figures.update({"quality": None, "paraphrases": None, "orders": None})
    return out


# --- the sentences the page shows ------------------------------------------------------------------


def not_computed(why: str) -> str:
    return f"Not computed: {why}."


def run_text(translators: list[str], paraphraser: str, languages: list[str]) -> str:
    """Who translates into what, and who paraphrases."""
    if not translators:
        who = "This run names no translator (translators is empty), so nothing is translated"
    elif len(translators) == 1:
        who = f"This run's translator is {translators[0]}"
    else:
        who = f"This run compares {len(translators)} translators, {spoken_list(translators)}"
    if not languages:
        into = ", but the run has no reference language to translate into (see the human reference below)"
    elif translators:
        into = f", translating into {language_names(languages)}"
    else:
        into = ""
    return f"{who}{into}; its paraphraser is {paraphraser}."


def parameters_text(reference_templates: int, max_paraphrases: int, reply_tokens: int) -> str:
    """How much this run does: templates, P, reply length."""
    sample = ("every template with a human translation in every reference language" if reference_templates == 0 else
              f"{count_noun(reference_templates, 'template')} per concern (a seeded sample of those with a human "
              "translation in every reference language)")
    asked = ("one paraphrase at a time (P = 1)" if max_paraphrases == 1 else
             f"P paraphrases at a time for P from 1 to {max_paraphrases}")
    return (f"This run takes {sample}, asks for {asked}, and lets a translator or paraphraser write at most "
            f"{count_noun(reply_tokens, 'token')} per reply.")


def library_text(choice: ReferenceChoice) -> str:
    """Which human reference, in which languages and why, and what it is worth."""
    named = language_names(choice.languages)
    if choice.source == "langbite":
        owner = "LangBiTe's library"
        first = (f"The human reference is LangBiTe's human {named} translations, read from {choice.shown_folder}."
                 if choice.languages else f"The human reference would be LangBiTe's library in {choice.shown_folder}.")
    else:
        owner = "The project's library"
        first = (f"The human reference is the project's own human translations in {choice.shown_folder}, in {named}."
                 if choice.languages else
                 f"The human reference would be the project's own human translations in {choice.shown_folder}.")
    parts = [first]
    asked = language_names(choice.asked) or "none"
    if choice.chosen_from == "reference_languages":
        dropped = [code for code in choice.asked if code not in choice.languages]
        if dropped:
            parts.append(f"{owner} has no {language_names(dropped, 'or')}, which reference_languages also names.")
    elif choice.chosen_from == "languages":
        parts.append(f"{owner} has none of reference_languages ({asked}), so the chapter compares in those of the "
                     "run's languages that it has.")
    else:
        parts.append(f"{owner} has none of reference_languages ({asked}) and none of the run's languages "
                     f"({language_names(choice.run_languages) or 'none'}), so every section below is empty; its languages "
                     f"are {language_names(choice.available)}: name one in reference_languages to compute this chapter.")
    if choice.source == "project" and choice.languages:
        parts.append("These translations were written for this project with an AI assistant's help and have not been "
                     "reviewed by native speakers (data/templates/README.md): closeness to them is closeness to these "
                     "texts, not certainly to a native speaker's.")
    if choice.fell_back:
        parts.append("LangBiTe's library (human Spanish and Catalan, the reference MLA-BiTe chose its translator by) "
                     "was not found here, and an offline run downloads nothing; reference_library: download (pinned "
                     "files, sha256-checked), or a folder of its files, compares against it instead.")
    return " ".join(parts)


def reference_summary(choice: ReferenceChoice) -> str:
    """The Summary's line on the reference."""
    if not choice.languages:
        return "This run had no reference language, so nothing was compared."
    if choice.source == "langbite":
        return f"The human reference was LangBiTe's human {language_names(choice.languages)} translations, as in MLA-BiTe."
    return (f"The human reference was the project's own {language_names(choice.languages)} translations, written with an AI "
            "assistant's help and not reviewed by native speakers.")


def reference_text(counts: pd.DataFrame, n_sample: int, n_concerns: int, languages: list[str]) -> str:
    """The library's size, how its translations pair with the English templates, and the sample."""
    if counts.empty:
        return ""
    n_english = int(counts["english"].iloc[0])
    if (counts["paired"] == n_english).all():
        size = (f"The English library has {count_noun(n_english, 'template')}, each with a human translation in "
                f"{language_names(languages)}.")
    else:
        found = [f"{int(row.human)} in {language_label(row.language)}" for row in counts.itertuples(index=False)]
        size = (f"The English library has {count_noun(n_english, 'template')}; the human translations number "
                f"{spoken_list(found)}.")
    rule = ("Each translation is paired with the English template of the same id, and a pair counts only if both "
            "files give the template the same concern and the same oracle.")
    if n_sample == 0:
        sample = "No English template has a human translation in every reference language, so none is translated here."
    else:
        into = f" into {language_names(languages)}" if len(languages) == 1 else f", the same ones into {language_names(languages)}"
        sample = (f"This run translates {count_noun(n_sample, 'English template')} from "
                  f"{count_noun(n_concerns, 'concern')}{into}.")
    return f"{size} {rule} {sample}"


def mismatch_text(mismatches: pd.DataFrame) -> str:
    """How many translations were left out for not matching their English template."""
    n = len(mismatches)
    if n == 0:
        return ("Every human translation has the same concern and oracle as its English template, so no pair is left "
                "out for a mismatch.")
    if n == 1:
        return "1 translation does not match its English template; it is left out and listed here:"
    return f"{n} translations do not match their English template; they are left out and listed here:"


def refused_text(refused: pd.DataFrame, pairs: pd.DataFrame, languages: list[str]) -> str:
    """What the cleaning rules make of the human translations themselves."""
    if refused.empty:
        return "The cleaning rules accept every human translated question, so they refuse no correct translation here."
    counts = [f"{int((refused['language'] == lang).sum())} of {int((pairs['language'] == lang).sum())} in "
              f"{language_label(lang)}" for lang in languages]
    return (f"The same rules, applied to the human translated questions, refuse {spoken_list(counts)}. "
            f"{reasons_sentence(refused['reason'].tolist(), 'refusal')} "
            f"{'It is' if len(refused) == 1 else 'They are'} listed below: where the human file itself is wrong (a "
            "placeholder renamed or written without braces) the rules are right, elsewhere they are false alarms, "
            "and a machine's success rate is only as exact as they are.")


def success_text(rates: pd.DataFrame, reasons: pd.DataFrame, translators: list[str]) -> str:
    """Per translator and language, how many templates survived, and why the others failed."""
    if not translators:
        return "This run names no translator, so no template was translated."
    if rates.empty:
        return "No template was tried."
    parts = [f"{row.via} translated {row.translated} of {count_noun(int(row.tried), 'template')} "
             f"({row.success_rate:.0%}) into {language_label(row.language)}" for row in rates.itertuples(index=False)]
    failures = [reason for reason, n in zip(reasons["reason"], reasons["templates"]) for _ in range(int(n))]
    weak = sorted(set(rates.loc[rates["success_rate"] < 0.5, "via"]) & set(OFFLINE_MODELS))
    expected = (f" {spoken_list(weak)}, the small chat model{'s' if len(weak) > 1 else ''} that ship{'' if len(weak) > 1 else 's'} "
                "with the project for machines without a model hub, is here to show that the method runs end to end, "
                "not to translate well: failures like these are what a model of this size gives. params/mlabite.yml "
                "names the translators of the study (NLLB, M2M100, Marian and two 7–8B chat models), for a GPU."
                if weak else "")
    return " ".join(filter(None, [spoken_list(parts) + ".", reasons_sentence(failures, "failure")])) + expected


def quality_text(corpus: pd.DataFrame) -> str:
    """How close the surviving translations come to the human ones: the range, with who is at each end."""
    if corpus.empty:
        return "No usable translation, so there is nothing to compare with the human translations here."
    if len(corpus) == 1:
        row = corpus.iloc[0]
        return (f"{row['via']} into {language_label(row['language'])}: median cosine to the human translation "
                f"{row['cosine_median']:.2f}, corpus chrF {row['chrf']:.1f} and BLEU {row['bleu']:.1f}, over "
                f"{count_noun(int(row['templates']), 'template')}.")
    shown = corpus["cosine_median"].map(lambda v: f"{v:.2f}")

    def who(value: str) -> str:
        return spoken_list([f"{row.via} into {language_label(row.language)}"
                            for row, text in zip(corpus.itertuples(index=False), shown) if text == value])

    low, high = shown.loc[corpus["cosine_median"].idxmin()], shown.loc[corpus["cosine_median"].idxmax()]
    if low == high:
        cosine = f"The median cosine to the human translation is {high} for {who(high)}"
    else:
        cosine = (f"The median cosine to the human translation runs from {low} for {who(low)} to {high} for "
                  f"{who(high)}")
    return (f"{cosine}; corpus chrF {value_range(corpus['chrf'].min(), corpus['chrf'].max(), 1)} and BLEU "
            f"{value_range(corpus['bleu'].min(), corpus['bleu'].max(), 1)}.")


def paraphrase_method_text(max_paraphrases: int, languages: list[str]) -> str:
    """What the paraphraser is asked for, and in which languages."""
    where = (f"of each template in English and of its human translation into {language_names(languages)}" if languages else
             "of each template in English")
    if max_paraphrases == 1:
        asked = f"Here the paraphraser is asked for one paraphrase (P = 1) {where}"
    else:
        asked = (f"Here the paraphraser is asked for P paraphrases at once, for P from 1 to {max_paraphrases}, "
                 f"{where}")
    return f"{asked}, and each paraphrase is compared with its source (placeholders filled as above)."


USABLE_COUNT = re.compile(r"^\d+ of \d+ rewordings usable$")


def shortfall_causes(reasons: list[str]) -> str:
    """Why requests got fewer paraphrases than asked: each request's reason split into its causes (the
    count of usable rewordings, which every short request has, left out), counted over requests."""
    if not reasons:
        return ""
    causes = [[part for part in str(reason).split("; ") if part and not USABLE_COUNT.match(part)] or ["no reason given"]
              for reason in reasons]
    if len(causes) == 1:
        return f"Why it came back short: {spoken_list(causes[0])}."
    counts = pd.Series([c for found in causes for c in found], dtype=object).value_counts()
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    listed = spoken_list([f"{cause} ({n})" for cause, n in ordered])
    several = "; a request can have several causes" if int(counts.sum()) > len(reasons) else ""
    return f"Why they came back short: {listed}{several}."


def paraphrase_text(by_p: pd.DataFrame, short: pd.DataFrame, languages: list[str]) -> str:
    """Mean cosine of a paraphrase to its source per language (from the smallest to the largest P,
    where there are several), and how many requests came back short and why."""
    shortfall = shortfall_causes(short["reason"].tolist())
    if by_p.empty:
        asked = f" in {count_noun(len(short), 'request')} (template × language × P)" if len(short) else ""
        return " ".join(filter(None, [f"The paraphraser made no usable paraphrase{asked}.", shortfall]))
    smallest, largest = int(by_p["P"].min()), int(by_p["P"].max())
    first = by_p.loc[by_p["P"] == smallest].set_index("language")["cosine_mean"]
    last = by_p.loc[by_p["P"] == largest].set_index("language")["cosine_mean"]
    moves, missing = [], []
    for lang in ["en", *languages]:
        name = language_label(lang)
        if smallest == largest:
            moves += [f"{name} {first[lang]:.2f}"] if lang in first.index else []
            missing += [] if lang in first.index else [lang]
        elif lang in first.index and lang in last.index:
            moves.append(f"{name} {first[lang]:.2f} → {last[lang]:.2f}")
        elif lang in first.index:
            moves.append(f"{name} {first[lang]:.2f} at P = {smallest}, none at P = {largest}")
        elif lang in last.index:
            moves.append(f"{name} none at P = {smallest}, {last[lang]:.2f} at P = {largest}")
        else:
            missing.append(lang)
    span = f"(P = {smallest})" if smallest == largest else f"from P = {smallest} to P = {largest}"
    parts = [f"Mean cosine of a paraphrase to its source {span}: {spoken_clauses(moves)}." if moves else "",
             f"No usable paraphrase in {language_names(missing, 'or')}." if missing else ""]
    if len(short):
        parts += [f"{count_noun(len(short), 'request')} (template × language × P) got fewer paraphrases than asked.",
                  shortfall]
    return " ".join(filter(None, parts))


def versions_text(n_paraphrases: int) -> str:
    """How a template's cosine in one order is made from its versions."""
    if n_paraphrases == 1:
        return "a template's cosine in each order is that of its one version"
    return f"a template's cosine in each order is the mean over its versions (up to {n_paraphrases})"


def order_text(cells: pd.DataFrame, alpha: float) -> str:
    """Per translator and language, which order keeps closer to the human translation, and whether
    the difference is reliable."""
    if cells.empty:
        return "No template has versions in both orders, so the two orders cannot be compared here."
    parts = []
    for row in cells.itertuples(index=False):
        over = count_noun(int(row.n), "template")
        if row.difference == 0:
            parts.append(f"{row.via} into {language_label(row.language)}: P2T and T2P equally close over {over}")
            continue
        better = "P2T" if row.difference > 0 else "T2P"
        verdict = "a reliable difference" if row.reliable else f"not a reliable difference (q ≥ {alpha:g})"
        parts.append(f"{row.via} into {language_label(row.language)}: {better} closer by {magnitude(row.difference)} "
                     f"over {over}, {verdict}")
    return spoken_clauses(parts) + "."


def order_summary(cells: pd.DataFrame) -> str:
    """The Summary's line on P2T against T2P: what this run found, or that it could not tell."""
    if cells.empty:
        return ("No template had versions in both orders, so this run cannot say whether paraphrasing before or "
                "after translation keeps closer to the human translation.")
    lead_in = "Paraphrasing before translation (P2T) against after it (T2P), template by template:"
    reliable, n = int(cells["reliable"].sum()), len(cells)
    if n == 1:
        return (f"{lead_in} the one translator × language cell shows "
                f"{'a reliable difference' if reliable else 'no reliable difference'}.")
    found = ("none shows a reliable difference" if reliable == 0 else
             "both show a reliable difference" if reliable == n == 2 else
             f"all {n} show a reliable difference" if reliable == n else
             f"{reliable} show{'s' if reliable == 1 else ''} a reliable difference")
    return f"{lead_in} of the {n} translator × language cells, {found}."


def best_text(rates: pd.DataFrame, corpus: pd.DataFrame, languages: list[str], source: Source,
              translators: list[str]) -> str:
    """Which translator comes closest to the human translations (ties named as ties), and how chapter
    30 would ask its translations."""
    if corpus.empty:
        if not translators:
            return "This run names no translator, so none can be recommended from it."
        return "No translator of this run made a usable translation, so none can be recommended from it."
    mean = corpus.groupby("via")["cosine_median"].mean().sort_values(ascending=False, kind="stable")
    top = mean.iloc[0]
    tied = sorted(str(v) for v in mean.index[mean.map(lambda v: f"{v:.2f}") == f"{top:.2f}"])
    rate_name = "mean success rate" if len(languages) > 1 else "success rate"
    library = "langbite" if source == "langbite" else "project"
    ask = (f"template_library: {library}, template_translations: machine and languages: "
           f"[{', '.join(languages)}]")
    if len(translators) == 1:
        best = tied[0]
        success = rates.loc[rates["via"] == best, "success_rate"].mean()
        return (f"This run's only translator, {best}, has a mean of the median cosines to the human translations of "
                f"{top:.2f} and a {rate_name} of {success:.0%}; with one translator there is no choice to make. "
                f"Chapter 30 asks its translations instead of the human ones with the parameters {ask}, "
                f"template_translator: {best}.")
    if len(tied) > 1:
        return (f"Of this run's translators, {spoken_list(tied)} come equally close to the human translations (mean of "
                f"the median cosines {top:.2f}), so this run does not choose between them. Chapter 30 asks one's "
                f"translations instead of the human ones with the parameters {ask} and template_translator set to it.")
    best = tied[0]
    success = rates.loc[rates["via"] == best, "success_rate"].mean()
    idle = [name for name in rates["via"].unique() if name not in mean.index]
    none = f"; {spoken_list(idle)} made no usable translation" if idle else ""
    return (f"Of this run's translators, {best} comes closest to the human translations (mean of the median cosines "
            f"{top:.2f}, {rate_name} {success:.0%}){none}. Chapter 30 asks its translations instead of the human "
            f"ones with the parameters {ask}, template_translator: {best}.")


def items_text(cells: pd.DataFrame, items: pd.DataFrame) -> str:
    """How much the drop moves when chapter 01's machine translations replace the human ones."""
    if cells.empty:
        return "No machine-translated item could be paired with a human translation and the English original."
    n_items = int(items["base_id"].nunique())
    head = (f"{count_noun(n_items, 'item')} {'was' if n_items == 1 else 'were'} machine-translated by chapter 01 "
            f"({spoken_list(sorted(items['translator'].unique()))}).")
    largest = cells.loc[cells["difference"].abs().idxmax()]
    reliable = int(cells["reliable"].sum())
    swap = "when the human translation is swapped for the machine one"
    if len(cells) == 1:
        if largest["difference"] == 0:
            change = (f"In the one model × language cell, {largest['model']} in "
                      f"{language_label(largest['language'])}, the drop is the same {swap}.")
        else:
            change = (f"In the one model × language cell, {largest['model']} in "
                      f"{language_label(largest['language'])}, the drop changes by "
                      f"{magnitude(largest['difference'])} {swap}, {'a reliable' if reliable else 'not a reliable'} "
                      "change after Benjamini–Hochberg.")
    elif largest["difference"] == 0:
        change = f"In none of the {len(cells)} model × language cells does the drop change {swap}."
    else:
        verdict = ("none of the changes is reliable" if reliable == 0 else
                   f"{'all' if reliable == len(cells) else reliable} of the {len(cells)} changes "
                   f"{'is' if reliable == 1 else 'are'} reliable")
        change = (f"Across the {len(cells)} model × language cells the drop changes by at most "
                  f"{magnitude(largest['difference'])} {swap}, for {largest['model']} in "
                  f"{language_label(largest['language'])}; {verdict} after Benjamini–Hochberg.")
    most = int(cells["n"].max())
    size = (f" With at most {count_noun(most, 'item')} per cell, a test can detect only large changes."
            if most < 30 else "")
    return f"{head} {change}{size}"
