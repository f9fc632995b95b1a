"""Chapter 02: how strongly does each model prefer the stereotyped continuation of each item?"""

from __future__ import annotations

import pandas as pd

from biasaudit.analyses import score_summary
from biasaudit.book.prose import collapsed_counts, count_noun
from biasaudit.book.report import Report, TableStyle
from biasaudit.lm.registry import OFFLINE_MODELS, cpu_has_native_bf16
from biasaudit.core.paths import run_dir
from biasaudit.run import pipeline
from biasaudit.run.beside import OWN_ITEMS_FILE, THIS_RUN, own_models, shown_model
from biasaudit.run.params import RunParams
from biasaudit.run.steps import read_step


def report(params: RunParams) -> Report:
    """The run's items and scores as its scoring step left them (`run.pipeline.run_scoring`)."""
    timings = read_step(params, "score")["timings"]
    items, collapsed, _ = pipeline.read_run_items(params.run_name)
    out = Report()
    out.values.update({"n_versions": len(items), "n_bases": int(items["base_id"].nunique()),
                       "n_collapsed": len(collapsed), "collapsed_counts": collapsed_counts(collapsed)})
    counts = items.groupby(["variant", "language"]).size().rename("versions").reset_index()
    out.add_table("counts", counts, TableStyle(columns={"variant": "variant", "language": "language",
                                                        "versions": "item versions"}))
    out.add_table("collapsed", collapsed, TableStyle(columns={
        "item_id": "item", "language": "language", "context": "context", "stereotyped": "stereotyped",
        "anti_stereotyped": "anti-stereotyped"}, empty=""))
    own = own_models(params.run_name)
    if own:
        out.values.update(beside_values(params, timings, own))
        scores = pipeline.read_scores(params.run_name)
        models = sorted(scores["model"].unique())
        timings = timings.assign(per_version_ms=(1000 * timings["seconds"] / timings["scored_now"]).where(
            timings["scored_now"] > 0), model=[shown_model(m, own) for m in timings["model"]])
    elif params.released_scores:
        scores = pipeline.read_scores(params.run_name)
        out.values["scoring_text"] = (f"This run imports the paper's released scores for "
                                      f"{count_noun(scores['model'].nunique(), 'model')}: nothing was scored here, so "
                                      "there are no timings.")
        out.values["engine_text"] = "No engine scored this run: its scores are the paper's, as released."
        out.values["precision_text"] = "The released scores do not say which precision they were computed in."
        out.values["stored_text"] = stored_text(scores, released=True)
        models = sorted(scores["model"].unique())
        timings = timings.assign(per_version_ms=pd.Series(dtype=float))
    else:
        models = list(params.models)
        scores = pipeline.read_scores(params.run_name, models=models)
        scores = scores.loc[scores["item_id"].isin(items["item_id"])]
        out.values["scoring_text"] = scoring_sentence(timings)
        out.values["stored_text"] = stored_text(scores, released=False)
        out.values["engine_text"] = engine_sentence(params, timings)
        out.values["precision_text"] = precision_sentence(pipeline.read_precisions(params.run_name, models),
                                                          params.scoring_dtype, cpu_has_native_bf16())
        # a speed per version only means something over versions this run actually scored
        timings["per_version_ms"] = (1000 * timings["seconds"] / timings["scored_now"]).where(timings["scored_now"] > 0)
    out.add_table("timings", timings, TableStyle(columns={"model": "model", "scored_now": "versions scored now",
                                                          "read_back": "read back from earlier runs",
                                                          "load_seconds": "seconds loading (and checking)",
                                                          "seconds": "seconds scoring",
                                                          "per_version_ms": "ms per version scored",
                                                          "batch_size": "batch size"},
                                                 decimals=1, empty=""))
    out.add_table("models", pd.DataFrame({"model": models, "what it is": [what_it_is(m, own) for m in models]}))
    summary = score_summary(scores, params.aggregate)
    english = summary.loc[(summary["variant"] == "original") & (summary["language"] == "en"), "soft"]
    out.values.update({"n_scored_now": int(timings["scored_now"].sum()), "n_read_back": int(timings["read_back"].sum()),
                       "english_soft": float(english.mean()) if len(english) else float("nan")})
    wide = summary.pivot_table(index=["variant", "language"], columns="model", values="soft").reset_index()
    wide.columns.name = None
    out.add_table("summary", wide)
    return out


def what_it_is(model: str, own: list[str]) -> str:
    """A model's line in the models table: the offline models described, a model of the release named as the
    paper's, one scored here beside it as this run's."""
    name = model.removesuffix(THIS_RUN)
    described = OFFLINE_MODELS[name].description if name in OFFLINE_MODELS else name
    if not own:
        return described
    return f"{described}: scored by this run" if model.endswith(THIS_RUN) else "the paper's, as released"


def beside_values(params: RunParams, timings: pd.DataFrame, own: list[str]) -> dict[str, str]:
    """What the page says of a run that scores its own models beside the paper's released ten."""
    items = pd.read_parquet(run_dir(params.run_name) / OWN_ITEMS_FILE)
    sample = (f"a seeded sample of {count_noun(items['base_id'].nunique(), 'base item')} of the paper's 362 "
              "(paper_sample)" if params.paper_sample else "every one of the paper's base items")
    names = ", ".join(shown_model(m, own) for m in own)
    n_reworded = int((items["variant"] == "rewording").sum())
    rewordings = (f", {count_noun(n_reworded, 'English rewording')} among them for the model's own noise floor"
                  if n_reworded else ": no English rewordings, since the folder read lacks the release's file of them "
                  "(noise_floor_paraphrases.json), so the model has no noise floor of its own")
    scores = pipeline.read_scores(params.run_name)
    released = stored_text(scores.loc[~scores["model"].str.endswith(THIS_RUN)], released=True)
    return {
        "scoring_text": (f"This run imports the paper's released scores and scores {names} on the paper's own items: "
                         f"{sample}, {count_noun(len(items), 'item version')}{rewordings}. {scoring_sentence(timings)}"),
        "stored_text": (f"{names} {'has' if len(own) == 1 else 'have'}, for every item version scored here, the summed "
                        "log-probability and token count of each of its three continuations. For the paper's models: "
                        + released[0].lower() + released[1:]),
        "engine_text": engine_sentence(params, timings),
        "precision_text": precision_sentence(pipeline.read_precisions(params.run_name, own), params.scoring_dtype,
                                             cpu_has_native_bf16()) + " The release does not record the precision of its scores.",
    }


def first_run_values(params: RunParams) -> dict[str, int | str]:
    """What this chapter says the first time a new run name is scored with `params` (chapter 02's
    exercise 3), worked out without scoring: every item version is scored now for every model, none is
    read back, and the page names the precision the params ask for."""
    if params.scoring_dtype == "auto":
        raise ValueError("name the precision (scoring_dtype) to say what a run will be stored in")
    items, _, _ = pipeline.select_run_items(**pipeline.item_settings(params))
    models = list(params.models)
    precisions = pd.DataFrame({"model": models, "precision": params.scoring_dtype, "versions": len(items)})
    return {"n_versions": len(items), "n_scored_now": len(items) * len(models), "n_read_back": 0,
            "precision_text": precision_sentence(precisions, params.scoring_dtype, cpu_has_native_bf16())}


def scoring_sentence(timings: pd.DataFrame) -> str:
    """What this run's scoring cost, separating versions scored now from those read back, and the
    scoring from loading the models (or starting and checking an engine), so that neither a warm rerun's
    seconds nor an engine's start-up is read as the scorer's speed."""
    seconds, scored, read = timings["seconds"].sum(), int(timings["scored_now"].sum()), int(timings["read_back"].sum())
    loading = timings["load_seconds"].fillna(0).sum() if "load_seconds" in timings else 0.0
    models = count_noun(len(timings), "model")
    if scored == 0:
        return (f"Every version was already stored by an earlier run of this run name, so nothing was scored now: "
                f"reading the {read:,} stored scores back for {models} took {seconds:.0f} s.")
    text = f"Scoring {scored:,} item {'version' if scored == 1 else 'versions'} for {models} took {seconds:.0f} s"
    if round(loading):
        engines = "starting and checking the engine" if set(timings.get("engine", [])) - {"transformers"} else \
            "loading the models"
        text += f", after {loading:.0f} s {engines}"
    if read:
        text += f"; {read:,} more were read back from an earlier run of this run name"
    return text + "."


def precision_sentence(precisions: pd.DataFrame, scoring_dtype: str, native_bf16: bool) -> str:
    """The precision the run's stored scores were computed in, per model (`pipeline.read_precisions`),
    and the reason for the default: fp32 on a CPU even where bf16 is native and faster, since bf16 can
    tip a cell that sits at the threshold (benchmarks/README.md, "bf16 on a CPU")."""
    if precisions.empty:
        return "No scores are stored for this run's models, so there is no precision to report."
    named = precisions.assign(precision=precisions["precision"].replace(
        "not recorded", "a precision not recorded (stored before it was)"))
    parts = []
    for model, rows in named.groupby("model", sort=True):
        kinds = ", ".join(f"{r.precision} ({r.versions:,} versions)" for r in rows.sort_values("precision").itertuples())
        parts.append(f"{model} in {kinds}" if len(rows) > 1 else f"{model} in {rows['precision'].iloc[0]}")
    mixed = [m for m, rows in precisions.groupby("model") if len(rows) > 1]
    text = "This run's stored scores were computed " + "; ".join(parts) + "."
    if mixed:
        text += (f" The scores of {', '.join(sorted(mixed))} mix precisions: rows scored in different runs of "
                 "this run name with different scoring_dtype values. Name one precision (scoring_dtype: "
                 "float32) to score the others again in it.")
    cpu = ("This machine's CPU computes bf16 natively, where scoring_dtype: bfloat16 scores about twice as fast"
           if native_bf16 else "This machine's CPU has no native bf16, where bf16 would be emulated and slower")
    default = "which scores in fp32 on a CPU (bf16 on a GPU)" if scoring_dtype == "auto" else "named by this run"
    return text + f" {cpu}; this run's scoring_dtype is {scoring_dtype}, {default}."


ENGINES = {
    "transformers": "transformers, the project's own packed scorer (the reference every other engine is checked against)",
    "vllm": "vLLM (token-id prompts, prompt log-probs from the raw logits)",
    "completions": "an OpenAI-compatible completions server at {url} (token-id prompts, echoed prompt log-probs)",
}


def stored_text(scores: pd.DataFrame, *, released: bool) -> str:
    """What every version of the run now has: a scored run stores each continuation's summed log-prob and
    token count; the released scores hold per-token means only, and sums where the release's token counts
    give them (the two contrasting continuations of the translations and English originals)."""
    if not released:
        return ("Every item version of the run now has, for each model, the summed log-probability and token count "
                "of each of its three continuations (runs/<run_name>/scores/).")
    summed = scores["lp_sum_stereotyped"].notna()
    if not summed.any():
        return ("Every item version of the run has, for each model, the per-token mean log-probability of each of its "
                "three continuations, as released; the release's token counts are not at hand, so there are no sums.")
    return (f"Every item version of the run has, for each model, the per-token mean log-probability of each of its "
            f"three continuations, as released; {summed.mean():.0%} of the model × version rows also have the "
            "summed log-probabilities of the two contrasting continuations, the mean times the release's token "
            "counts (the English rewordings have no counts).")


def engine_sentence(params: RunParams, timings: pd.DataFrame) -> str:
    """Which engine and executor scored this run, and what was checked, in one paragraph."""
    engine = ENGINES[params.engine].format(url=params.engine_url)
    if params.executor == "ray":
        actors = int(timings["actors"].max()) if len(timings) and timings["scored_now"].sum() else 0
        where = (f"on a Ray pool of {count_noun(actors, 'actor')}, one model per actor, in shards of {params.shard_items} items "
                 "that this process stored as each came back" if actors else
                 "with the Ray executor, which had nothing left to score")
        retried = int(timings["shards_retried"].sum())
        if retried:
            where += f"; {count_noun(retried, 'shard')} went to a new actor after {'its' if retried == 1 else 'theirs'} died"
    else:
        where = "in this process, one model after another"
    text = f"This run was scored by {engine}, {where}."
    if params.engine == "completions":
        declared = params.engine_precision
        text += (f" The server is declared to compute in {declared} (engine_precision), and its rows are stored as "
                 f"completions-{declared}" + (", held to fp32's agreement with transformers by the check below."
                                              if declared == "float32" else ".") if declared else
                 " The server's precision is not declared (engine_precision), so its rows are stored as "
                 "\"completions\" and nothing holds them apart from rows of another precision under this run name.")
    if params.engine != "transformers":
        against = ("transformers in fp32" if params.engine_check == "transformers" else
                   "themselves only (engine_check: self; agreement with transformers was not checked)")
        text += (f" Before each model, its log-probs on four fixed sentences were checked against {against}, "
                 f"to within {params.engine_tolerance:g} nats; a run that fails the check stops before scoring.")
    return text
