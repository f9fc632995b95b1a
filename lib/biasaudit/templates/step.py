"""Chapter 30's step: the run's templates, every chat model asked, every template judged.

`run_template_step(params)` writes its tables to runs/<run>/steps/template_tests/ (`run.steps`):
the templates asked, their filled prompts, LangBiTe's data quirks, what a machine could not make,
the verdicts and the replies; the chapter reads them. Machine-made templates are also written in
LangBiTe's own file format under runs/<run>/templates/machine/, so LangBiTe itself could run them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from biasaudit.core.paths import run_dir
from biasaudit.lm.generate import (
    GenerationSettings,
    Generator,
    LocalGenerator,
    OpenAIGenerator,
    reply_cache,
)
from biasaudit.run.engine import RayOptions
from biasaudit.run.params import RunParams
from biasaudit.run.steps import StepTables, write_step
from biasaudit.templates.asking import run_template_tests
from biasaudit.templates.library import (
    PROJECT_LIBRARY,
    instances,
    read_communities,
    read_langbite_library,
    read_project_library,
    sample_templates,
)
from biasaudit.templates.versions import (
    FAILED_COLUMNS,
    paraphrase_templates,
    translate_communities,
    translate_templates,
    write_library,
)
from biasaudit.translate import Paraphraser, make_translator


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
                                     device=params.device_or_none, dtype=params.generation_dtype, progress=False,
                                     executor=RayOptions.from_params(params))
        translated, not_made = translate_templates(templates, translator, missing)
        communities, lists_failed = translate_communities(communities, translator, missing)
        made.append(translated)
        failed += [not_made, lists_failed.rename(columns={"markup": "template_id"}).assign(
            field="communities", base_id="", via=translator.name)]
    if not (templates["variant"] == "paraphrase").any() and params.template_paraphraser:
        paraphraser = Paraphraser(params.template_paraphraser, n=params.n_paraphrases, batch_size=params.batch_size,
                                  device=params.device_or_none, dtype=params.generation_dtype, progress=False,
                                  executor=RayOptions.from_params(params))
        reworded, not_made = paraphrase_templates(templates.loc[templates["variant"] == "original"], paraphraser)
        made.append(reworded)
        failed.append(not_made)
    if made:
        machine = pd.concat(made, ignore_index=True)
        write_library(machine, run_dir(params.run_name) / "templates" / "machine")
        templates = pd.concat([templates, machine[templates.columns]], ignore_index=True)
    failed = pd.concat(failed, ignore_index=True)[FAILED_COLUMNS] if failed else pd.DataFrame(columns=FAILED_COLUMNS)
    return Library(templates.reset_index(drop=True), communities, quirks, failed, n_library)


def generator(params: RunParams, model: str) -> Generator:
    """The model asked: behind the run's OpenAI-compatible endpoint when one is set, else here: through
    transformers, or vLLM (`engine: vllm`), in this process or split over a Ray pool (`executor: ray`)."""
    settings = GenerationSettings(max_new_tokens=params.max_new_tokens, temperature=params.temperature,
                                  seed=params.seed, dtype=params.generation_dtype)
    if params.endpoint:
        return OpenAIGenerator(model, params.endpoint, settings, api_key_env=params.api_key_env)
    local = LocalGenerator(model, settings, device=params.device_or_none)
    pool = RayOptions.from_params(params)
    if pool is not None:
        from biasaudit.run.ray_executor import RayGenerator  # the optional extra

        return RayGenerator(local, pool, engine=params.engine, device=params.device_or_none,
                            max_model_len=params.max_model_len)
    if params.engine == "vllm":
        from biasaudit.lm.vllm_engine import VLLMGenerator  # the optional extra

        return VLLMGenerator(model, settings, max_model_len=params.max_model_len)
    return local


def run(params: RunParams, templates: pd.DataFrame, communities: dict
        ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, bool]]:
    """Ask every chat model every filled prompt and judge every template. Also returns, per model,
    whether it was asked through a chat template (a server's always is)."""
    evaluations, responses, chat = [], [], {}
    for model in params.chat_models:
        asker = generator(params, model)
        chat[model] = bool(getattr(asker, "chat", True))
        ev, resp = run_template_tests(
            templates, communities, asker, max_instances=params.max_instances or None,
            seed=params.seed, n_attempts=params.n_attempts, delta=params.delta, note=params.quote_note,
            answer_margin=params.answer_margin, oracle_match=params.oracle_match, cache=reply_cache(),
            batch_size=params.batch_size)
        evaluations.append(ev)
        responses.append(resp)
    evaluations = pd.concat(evaluations, ignore_index=True)
    responses = pd.concat(responses, ignore_index=True)
    if params.oracle_match == "langbite":
        evaluations = evaluations.assign(verdict=evaluations["verdict_langbite"], verdict_langbite=evaluations["verdict"])
    return evaluations, responses, chat


def run_template_step(params: RunParams) -> StepTables:
    """Make the run's templates, ask and judge them; write every table (`run.steps`)."""
    lib = library(params)
    filled = instances(lib.templates, lib.communities, max_instances=params.max_instances or None, seed=params.seed)
    evaluations, responses, chat = run(params, lib.templates, lib.communities)
    made = StepTables({"templates": lib.templates, "filled": filled[["template_id", "n_instances", "instance"]],
                       "quirks": lib.quirks, "not_made": lib.not_made, "evaluations": evaluations,
                       "responses": responses},
                      {"n_library": lib.n_library, "chat": chat})
    write_step(params, "template_tests", made)
    return made
