"""Chapter 30: LangBiTe's template tests by language: do chat models answer bias questions the same
way in every language, and is a language's lower pass rate more than rewording alone produces?"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from biasaudit import charts
from biasaudit.analyses import templates as tt
from biasaudit.generate import (
    GenerationSettings,
    LocalGenerator,
    OpenAIGenerator,
    reply_cache,
)
from biasaudit.models import OFFLINE_MODELS
from biasaudit.params import RunParams
from biasaudit.paths import run_dir
from biasaudit.report import Report, TableStyle, note, spoken_list
from biasaudit.runstore import write_atomically
from biasaudit.template_tests import run_template_tests
from biasaudit.template_versions import (
    FAILED_COLUMNS,
    paraphrase_templates,
    translate_communities,
    translate_templates,
    write_library,
)
from biasaudit.templates import (
    PROJECT_LIBRARY,
    instances,
    read_communities,
    read_langbite_library,
    read_project_library,
    sample_templates,
)
from biasaudit.translate import Paraphraser, make_translator
from biasaudit.translate.languages import language_label

RATES_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "passed": "passed", "failed": "failed", "errors": "unprocessable",
    "pass_rate": "pass rate", "low": "low", "high": "high"}, percent=("pass_rate", "low", "high"))
CELLS_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "n": "templates", "pass_rate_en": "pass rate (English)",
    "pass_rate": "pass rate (language)", "pass_drop": "pass drop (English − language)",
    "discordant": "templates that change", "p": "p", "q": "q", "reliable": "reliable"},
    percent=("pass_rate_en", "pass_rate"))
FLOOR_STYLE = TableStyle(columns={
    "model": "model", "via": "route", "n": "templates", "pass_rate_en": "pass rate (English)",
    "pass_rate": "pass rate (reworded)", "floor": "floor |English − reworded|", "discordant": "templates that change",
    "p": "p", "q": "q", "reliable": "reliable"}, percent=("pass_rate_en", "pass_rate"))


@dataclass
class Library:
    """The templates a run asks, and what is known about how they were made."""

    templates: pd.DataFrame
    communities: dict
    quirks: pd.DataFrame  # LangBiTe's data quirks, per template
    not_made: pd.DataFrame  # templates a machine could not translate or paraphrase, with the reason
    n_library: int  # English templates in the library, before any sample


def library(params: RunParams) -> Library:
    """The run's templates (English originals, translations into the run's languages, English
    rewordings of the routes asked; a seeded sample of `max_templates` per concern), their
    communities, the data quirks reported per template, and what a machine could not make.

    Languages the library lacks are machine-translated when `template_translator` is set (every
    language, the human translations set aside, with `template_translations: machine`), and P
    English rewordings are machine-written when the library has none and `template_paraphraser` is
    set; the machine-made templates are also written in LangBiTe's format under
    runs/<run>/templates/machine/, so LangBiTe itself could run them."""
    if params.template_library == "project":
        templates, communities = read_project_library(params.languages)
        quirks = pd.DataFrame(columns=["template_id", "language", "quirk"])
    else:
        pronouns = {"PRONOUN": read_communities(PROJECT_LIBRARY / "communities.json")["PRONOUN"]}
        templates, communities, quirks = read_langbite_library(params.template_library, params.languages,
                                                               extra_communities=pronouns)
    keep = (templates["variant"] != "paraphrase") | templates["via"].isin(params.template_routes)
    templates = templates.loc[keep & templates["language"].isin(["en", *params.languages])]
    n_library = int((templates["variant"] == "original").sum())
    templates = sample_templates(templates, params.max_templates, params.seed)
    made, failed = [], []
    if params.template_translations == "machine":
        templates = templates.loc[templates["language"] == "en"]  # the translator makes every other language
    missing = [lang for lang in params.languages if lang not in set(templates["language"])]
    if missing and params.template_translator:
        translator = make_translator(params.template_translator, batch_size=params.batch_size,
                                     device=params.device_or_none, progress=False)
        translated, not_made = translate_templates(templates, translator, missing)
        communities, lists_failed = translate_communities(communities, translator, missing)
        made.append(translated)
        failed += [not_made, lists_failed.rename(columns={"markup": "template_id"}).assign(
            field="communities", base_id="", via=translator.name)]
    if not (templates["variant"] == "paraphrase").any() and params.template_paraphraser:
        paraphraser = Paraphraser(params.template_paraphraser, n=params.n_paraphrases, batch_size=params.batch_size,
                                  device=params.device_or_none, progress=False)
        reworded, not_made = paraphrase_templates(templates.loc[templates["variant"] == "original"], paraphraser)
        made.append(reworded)
        failed.append(not_made)
    if made:
        machine = pd.concat(made, ignore_index=True)
        write_library(machine, run_dir(params.run_name) / "templates" / "machine")
        templates = pd.concat([templates, machine[templates.columns]], ignore_index=True)
    failed = pd.concat(failed, ignore_index=True)[FAILED_COLUMNS] if failed else pd.DataFrame(columns=FAILED_COLUMNS)
    return Library(templates.reset_index(drop=True), communities, quirks, failed, n_library)


def generator(params: RunParams, model: str):
    settings = GenerationSettings(max_new_tokens=params.max_new_tokens, temperature=params.temperature,
                                  seed=params.seed, dtype=params.generation_dtype)
    if params.endpoint:
        return OpenAIGenerator(model, params.endpoint, settings, api_key_env=params.api_key_env)
    return LocalGenerator(model, settings, device=params.device_or_none)


def run(params: RunParams, templates: pd.DataFrame, communities: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ask every chat model every filled prompt and judge every template; stored under runs/<run>/templates/."""
    evaluations, responses = [], []
    for model in params.chat_models:
        ev, resp = run_template_tests(
            templates, communities, generator(params, model), max_instances=params.max_instances or None,
            seed=params.seed, n_attempts=params.n_attempts, delta=params.delta, note=params.quote_note,
            answer_margin=params.answer_margin, cache=reply_cache(), batch_size=params.batch_size)
        evaluations.append(ev)
        responses.append(resp)
    evaluations = pd.concat(evaluations, ignore_index=True)
    responses = pd.concat(responses, ignore_index=True)
    if params.oracle_match == "langbite":
        evaluations = evaluations.assign(verdict=evaluations["verdict_langbite"], verdict_langbite=evaluations["verdict"])
    folder = run_dir(params.run_name) / "templates"
    write_atomically(evaluations, folder / "evaluations.parquet")
    write_atomically(responses, folder / "responses.parquet")
    return evaluations, responses


def library_table(templates: pd.DataFrame, filled: pd.DataFrame) -> pd.DataFrame:
    """Per concern: templates asked, prompts their filling gives in all, and prompts asked, in
    English (the other languages ask the same templates where the library has them)."""
    counts = filled.groupby("template_id").agg(all=("n_instances", "first"), asked=("instance", "size"))
    table = templates.join(counts, on="template_id").fillna({"all": 0, "asked": 0})
    table["kind"] = table["variant"].where(table["language"] == "en", "translation")
    wide = (table.groupby(["concern", "kind"]).agg(templates=("template_id", "size"), prompts=("all", "sum"),
                                                   asked=("asked", "sum")).astype(int).unstack("kind", fill_value=0))
    wide.columns = [f"{what} ({kind})" for what, kind in wide.columns]
    return wide.reset_index()


def rates_text(rates: pd.DataFrame) -> str:
    parts = []
    for model, mine in rates.groupby("model", sort=False):
        english = mine.loc[mine["language"] == "en"]
        others = mine.loc[mine["language"] != "en"].dropna(subset=["pass_rate"])
        if english.empty or others.empty:
            continue
        low, high = others.loc[others["pass_rate"].idxmin()], others.loc[others["pass_rate"].idxmax()]
        parts.append(f"{model} passes {english['pass_rate'].iloc[0]:.0%} of the English templates, and from "
                     f"{low['pass_rate']:.0%} in {language_label(low['language'])} to {high['pass_rate']:.0%} in {language_label(high['language'])} in "
                     "the other languages")
    return "; ".join(parts) + "." if parts else "No template got a verdict in this run."


def cells_text(cells: pd.DataFrame, floor: pd.DataFrame, alpha: float) -> str:
    if cells.empty:
        return "No language has templates judged both in English and in translation, so no cell can be tested."
    reliable = cells.loc[cells["reliable"]]
    lower, higher = reliable.loc[reliable["pass_drop"] > 0], reliable.loc[reliable["pass_drop"] < 0]
    floors = tt.floor_by_model(floor) if len(floor) else pd.Series(dtype=float)
    beyond = cells.loc[cells["model"].map(floors).notna() & (cells["pass_drop"].abs() > cells["model"].map(floors))]
    text = (f"Of the {len(cells)} model × language cells, {len(lower)} pass reliably fewer templates than English "
            f"and {len(higher)} reliably more (paired sign-flip test over templates, Benjamini–Hochberg over all "
            f"{len(cells)} cells, alpha {alpha})")
    if len(floors):
        text += (f"; {len(beyond)} differ from English by more than their model's rewording floor "
                 f"({spoken_list([f'{m} {v:.0%}' for m, v in floors.items()])}), and "
                 f"{int(floor['reliable'].sum())} of {len(floor)} rewording cells are themselves called reliable.")
    else:
        text += ". This run asks no English rewordings, so there is no floor to compare with."
    return text


def report(params: RunParams) -> Report:
    lib = library(params)
    templates, communities = lib.templates, lib.communities
    filled = instances(templates, communities, max_instances=params.max_instances or None, seed=params.seed)
    evaluations, responses = run(params, templates, communities)
    options = params.options
    rates = tt.pass_rates(evaluations.loc[evaluations["variant"] != "paraphrase"], ["model", "language"],
                          level=params.level)
    by_concern = tt.pass_rates(evaluations.loc[evaluations["variant"] != "paraphrase"],
                               ["model", "language", "concern"], level=params.level)
    cells = tt.template_cells(evaluations, options)
    floor = tt.template_floor(evaluations, options)
    out = Report()
    out.add_table("library", library_table(templates, filled))
    out.add_table("not_made", lib.not_made, TableStyle(empty="No template of this run was machine-made."))
    out.add_table("quirks", lib.quirks, TableStyle(empty="The project's library has no data quirks (every placeholder "
                                                     "has a community list; a bad row would have stopped the run)."))
    out.add_table("rates", rates, RATES_STYLE)
    out.add_table("by_concern", by_concern.pivot_table(index=["model", "concern"], columns="language",
                                                       values="pass_rate").reset_index(), TableStyle(decimals=2))
    out.add_table("errors", tt.pass_rates(evaluations, ["model", "variant", "language"])[
        ["model", "variant", "language", "errors", "total", "error_share"]], TableStyle(percent=("error_share",)))
    out.add_table("error_reasons", evaluations.loc[evaluations["verdict"] == "Error"].groupby(
        ["model", "reason"]).size().rename("templates").reset_index().sort_values("templates", ascending=False))
    out.add_table("cells", cells, CELLS_STYLE)
    out.add_table("floor", floor, FLOOR_STYLE)
    out.add_table("matchers", tt.matcher_differences(evaluations))
    out.add_table("examples", responses.groupby("template_id").head(1).head(6)[["model", "template_id", "prompt_text",
                                                                                 "reply"]])
    correlations = tt.language_correlations(evaluations)
    out.values.update({
        "n_templates": int((templates["variant"] == "original").sum()), "n_library": lib.n_library,
        "max_templates": params.max_templates,
        "n_languages": int(templates["language"].nunique()),
        "n_concerns": int(templates["concern"].nunique()),
        "n_prompts_all": int(filled.drop_duplicates("template_id")["n_instances"].sum()),
        "n_prompts_asked": len(filled), "max_instances": params.max_instances,
        "models": spoken_list(list(params.chat_models)),
        "base_models": spoken_list([m for m in params.chat_models if m in OFFLINE_MODELS
                                    and not OFFLINE_MODELS[m].chat]) or "none",
        "n_evaluations": len(evaluations), "error_share": float(evaluations["verdict"].eq("Error").mean()),
        "rates_text": rates_text(rates), "cells_text": cells_text(cells, floor, params.alpha),
        "matcher_changes": int((evaluations["verdict"] != evaluations["verdict_langbite"]).sum()),
        "n_attempts": params.n_attempts,
    })
    out.figures["polar"] = charts.polar_pass_rates(by_concern)
    out.figures["summary"] = charts.pass_rate_heatmap(rates)
    out.figures["correlations"] = (charts.correlation_heatmap(correlations) if correlations["r"].notna().any() else
                                   note("No correlation can be computed: every language's pass rate is the same in "
                                        "every concern (here, none passes)."))
    out.figures["cells"] = charts.pass_drops(cells, floor)
    return out
