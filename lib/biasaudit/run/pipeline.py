"""The steps a run chains together: gather the item versions, score them, read them back, and
plan and run what the pipeline-error chapter rescores.

Notebooks call the steps (`prepare_run`, `run_scoring`, `run_error_reruns`) before their chapter's
report reads the results, so that what a step does is one readable line, and so that a run killed
halfway resumes (every scored chunk is stored at once: `biasaudit.core.store.ScoreStore`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from biasaudit.core.words import counted, plural
from biasaudit.analyses import stats
from biasaudit.core.options import DEFAULT_SEED
from biasaudit.core.paths import project_path, run_dir
from biasaudit.core.store import (
    DTYPE_COLUMN,
    ScoreStore,
    run_lock,
    scores_for_items,
    stored_scores,
    write_atomically,
)
from biasaudit.data.bbq import load_bbq
from biasaudit.data.item_table import ITEM_COLUMNS, ItemError, read_items, select_items
from biasaudit.data.public import resolve_data_dir
from biasaudit.data.release_files import RELEASED_MODELS
from biasaudit.data.release_import import JUDGMENTS_FILE, LLM_FILE, RELEASED_SIMILARITY, import_released
from biasaudit.data.release_items import paper_bank
from biasaudit.data.stereoset import load_stereoset
from biasaudit.lm.registry import scoring_dtype
from biasaudit.run.engine import EngineSpec, ModelScorer, RayOptions
from biasaudit.run.beside import BESIDE_FILE, OWN_ITEMS_FILE, THIS_RUN, own_models, shown_model
from biasaudit.run.params import PAPER_BANK, check_model_name
from biasaudit.run.steps import StepTables, write_step

VARIANTS_WITH_REWORDINGS = ["original", "translation", "rewording"]


def load_sources(
    sources: list[str],
    *,
    data_dir: str = "",
    stereoset_per_category: int = 50,
    bbq_per_category: int = 30,
    seed: int = DEFAULT_SEED,
    stereoset_label_map: bool = False,
    bbq_roles_by_order: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """English items from the public sources named in `sources` ("stereoset", "bbq"), with stage counts.

    A per-category size of 0 keeps every item. `data_dir` (else $BIASAUDIT_DATA_DIR) is a local
    mirror; without one the loaders go to the Hugging Face hub.
    """
    unknown = set(sources) - {"stereoset", "bbq"}
    if unknown:
        raise ValueError(f"unknown {plural(len(unknown), 'source')} {sorted(unknown)}; choose from 'stereoset', 'bbq'")
    folder = str(project_path(data_dir)) if data_dir else None
    tables, stages = [], []
    if "stereoset" in sources:
        items, stage = load_stereoset(folder, per_category=stereoset_per_category or None, seed=seed,
                                      stereoset_label_map=stereoset_label_map)
        tables.append(items)
        stages.append(stage)
    if "bbq" in sources:
        items, stage = load_bbq(folder, per_category=bbq_per_category or None, seed=seed,
                                bbq_roles_by_order=bbq_roles_by_order)
        tables.append(items)
        stages.append(stage)
    if not tables:
        return pd.DataFrame(columns=ITEM_COLUMNS), pd.DataFrame(columns=["source", "category", "stage", "n", "reason"])
    return pd.concat(tables, ignore_index=True), pd.concat(stages, ignore_index=True)


def select_run_items(
    *,
    item_banks: list[str],
    languages: list[str],
    include_rewordings: bool = True,
    sources: list[str] | None = None,
    paper_sample: int = 0,
    released_scores: str = "",
    **source_options,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The item versions a run with these settings scores, the collapsed contrasts it sets aside and
    the public sources' stage counts, written nowhere: a page can say what a rerun would score.
    `paper_sample` and `released_scores` say which of the paper's items, and from where, when a bank is
    "paper" (`data.release_items.paper_bank`)."""
    banks, set_aside = [], []
    for path in item_banks:
        if path == PAPER_BANK:
            bank, collapsed, _ = paper_bank(released_scores, data_dir=source_options.get("data_dir", ""),
                                            sample=paper_sample, seed=source_options.get("seed", DEFAULT_SEED))
            banks.append(bank)
            set_aside.append(collapsed)
        else:
            banks.append(read_items(project_path(path)))
    present = set().union(*(set(bank["language"]) for bank in banks)) if banks else set()
    absent = [language for language in languages if language not in present]
    if banks and absent:
        raise ItemError(f"key 'languages': {absent} has no version in the item {plural(len(item_banks), 'bank')} {list(item_banks)} "
                        f"(they hold {sorted(present - {'en'})}); drop it from the params or add its translations")
    public, stages = load_sources(list(sources or []), **source_options)
    table = pd.concat([*banks, public], ignore_index=True) if len(public) else pd.concat(banks, ignore_index=True)
    duplicated = table.loc[table["item_id"].duplicated(), "item_id"].tolist()
    if duplicated:
        raise ValueError(f"item ids appear more than once across {item_banks} and {sources}: {duplicated[:5]}")
    variants = VARIANTS_WITH_REWORDINGS if include_rewordings else ["original", "translation"]
    items, collapsed = select_items(table, languages=[*languages, "en"], variants=variants)
    if set_aside:  # the paper's own rule set these aside before the project's
        paper_collapsed, _ = select_items(pd.concat(set_aside, ignore_index=True), languages=[*languages, "en"],
                                          variants=variants, drop_collapsed=False)
        collapsed = pd.concat([paper_collapsed, collapsed], ignore_index=True)
    return items, collapsed, stages


def prepare_items(
    run_name: str,
    *,
    item_banks: list[str],
    languages: list[str],
    include_rewordings: bool = True,
    sources: list[str] | None = None,
    **source_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read the item banks (and public sources), keep the run's languages, set aside collapsed contrasts.

    Writes runs/<run>/items.parquet (what gets scored), runs/<run>/collapsed.parquet
    (translations whose two contrasting continuations became the same text) and
    runs/<run>/stages.parquet (public-source items counted at each loading stage).
    `source_options` go to `load_sources`.
    """
    items, collapsed, stages = select_run_items(item_banks=item_banks, languages=languages,
                                                include_rewordings=include_rewordings, sources=sources,
                                                **source_options)
    folder = run_dir(run_name)
    with run_lock(folder):
        write_atomically(items, folder / "items.parquet")
        write_atomically(collapsed, folder / "collapsed.parquet")
        write_atomically(stages, folder / "stages.parquet")
    return items, collapsed


def prepare_run(params) -> None:
    """Write a run's items (`biasaudit.run.params.RunParams`): the paper's released scores when
    `released_scores` is set (imported as the run's items and scores; beside them, the run's own models'
    items, `prepare_beside_paper`), else the item banks and public sources of the params."""
    if params.beside_paper:
        prepare_beside_paper(params)
        return
    (run_dir(params.run_name) / BESIDE_FILE).unlink(missing_ok=True)  # not such a run (any more)
    if params.released_scores:
        import_released(params.run_name, params.released_scores, models=params.model_filter)
    else:
        prepare_items(params.run_name, **item_settings(params))


def prepare_beside_paper(params) -> None:
    """Import the released scores of the paper's ten models (keeping any scores of the run's own models
    already stored: a rerun resumes) and write the items the run's own models score: the paper's items
    (a seeded sample of `paper_sample` bases, or all), with any other bank of `item_banks`. The run's items
    are the released ones and those own items the release has not; beside.json names the run's own models."""
    clash = [m for m in params.models if m in RELEASED_MODELS]
    if clash:
        raise ValueError(f"key 'models': {clash} {'is' if len(clash) == 1 else 'are'} the name of a released model; "
                         "scored here beside the release, a model needs a name of its own (its Hugging Face id)")
    import_released(params.run_name, params.released_scores, keep_models=list(params.models))
    own, own_collapsed, _ = select_run_items(**item_settings(params))
    folder = run_dir(params.run_name)
    with run_lock(folder):
        released = pd.read_parquet(folder / "items.parquet")
        items = pd.concat([released, own.loc[~own["item_id"].isin(released["item_id"])]], ignore_index=True)
        collapsed = pd.concat([pd.read_parquet(folder / "collapsed.parquet"), own_collapsed], ignore_index=True)
        collapsed = collapsed.drop_duplicates("item_id").loc[lambda t: ~t["item_id"].isin(items["item_id"])]
        write_atomically(items, folder / "items.parquet")
        write_atomically(collapsed.reset_index(drop=True), folder / "collapsed.parquet")
        write_atomically(own, folder / OWN_ITEMS_FILE)
        (folder / BESIDE_FILE).write_text(json.dumps({"this_run": list(params.models), "paper_sample": params.paper_sample,
                                                      "own_versions": len(own)}, indent=1), encoding="utf-8")


def item_settings(params) -> dict:
    """The parameters that decide a run's items, as `select_run_items` and `prepare_items` take them."""
    return dict(item_banks=list(params.item_banks), languages=list(params.languages),
                include_rewordings=params.include_rewordings, sources=list(params.sources), data_dir=params.data_dir,
                paper_sample=params.paper_sample, released_scores=params.released_scores,
                stereoset_per_category=params.stereoset_per_category, bbq_per_category=params.bbq_per_category,
                seed=params.seed, stereoset_label_map=params.stereoset_label_map,
                bbq_roles_by_order=params.bbq_roles_by_order)


def scores_of(items: pd.DataFrame, model: str, store: ScoreStore, *, batch_size: int | Literal["auto"] = 16,
              device: str | None = None, scorer_boundary: bool = False, dtype: str = "auto",
              progress: bool = True, spec: EngineSpec | None = None) -> pd.DataFrame:
    """`model`'s scores of `items`: read back from `store` when every one is stored (without loading
    torch or the model: a warm rerun), else scored where missing: by `scoring.score`, or by the engine
    of `spec` (`run.engine`). `dtype` as in `score_run`."""
    spec = spec or EngineSpec(dtype=dtype, device=device, batch_size=batch_size)
    wanted = spec.reused_precision
    done = stored_scores(store, model, scorer_boundary, items, wanted)
    if len(done) == len(items):
        return scores_for_items(items, done, n_scored=0, batch_size="auto")
    if spec.engine != "transformers":
        scorer = ModelScorer(model, spec)
        started = time.perf_counter()
        scorer.load()  # the engine started and checked, timed apart from the scoring
        load_seconds = time.perf_counter() - started
        table = scorer.score(items, scorer_boundary=scorer_boundary, store=store, progress=progress)
        table.attrs["load_seconds"] = load_seconds
        return table
    # loads torch: only when something is left to score
    from biasaudit.lm.scoring import score

    return score(items, model, batch_size=spec.batch_size, device=spec.device, dtype=scoring_dtype(spec.dtype),
                 scorer_boundary=scorer_boundary, store=store, progress=progress)


def score_run(
    run_name: str,
    items: pd.DataFrame,
    *,
    models: list[str],
    batch_size: int | Literal["auto"] = 16,
    device: str | None = None,
    scorer_boundary: bool = False,
    dtype: str = "auto",
    spec: EngineSpec | None = None,
    ray_options: RayOptions | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score the items with every model, resuming from runs/<run>/scores/; return (scores, timings:
    per model, the versions scored now and read back from the store, the seconds and the batch
    size that worked, the engine and the executor).

    `dtype` is the params' `scoring_dtype`: "auto" (the device's default: fp32 on a CPU, bf16 on
    CUDA; stored rows are reused whatever precision they were scored in), or "float32",
    "bfloat16", "float16" (stored rows of another precision are scored again). `spec` (the params'
    engine; it overrides `batch_size`, `device` and `dtype`) and `ray_options` (the Ray pool; None:
    this process) come from `EngineSpec.from_params` and `RayOptions.from_params`."""
    spec = spec or EngineSpec(dtype=dtype, device=device, batch_size=batch_size)
    if ray_options is not None:
        from biasaudit.run.ray_executor import score_on_ray  # the optional extra

        return score_on_ray(run_name, items, models=models, spec=spec, options=ray_options,
                            scorer_boundary=scorer_boundary)
    store = ScoreStore(run_dir(run_name))
    tables, timings = [], []
    for model in models:
        started = time.perf_counter()
        table = scores_of(items, model, store, scorer_boundary=scorer_boundary, spec=spec)
        tables.append(table)
        n_scored = table.attrs["n_scored"]
        load_seconds = table.attrs.get("load_seconds", 0.0)
        timings.append({"model": model, "scored_now": n_scored, "read_back": len(items) - n_scored,
                        "seconds": time.perf_counter() - started - load_seconds,
                        "batch_size": table.attrs.get("batch_size", spec.batch_size),
                        "load_seconds": load_seconds, "engine": spec.engine,
                        "executor": "local", "actors": 1, "shards_retried": 0})
    return pd.concat(tables, ignore_index=True), pd.DataFrame(timings)


def read_run_items(run_name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(items, collapsed, stages) of a run as prepared or imported; stages is empty when none were recorded."""
    folder = run_dir(run_name)
    if not (folder / "items.parquet").exists():
        raise FileNotFoundError(f"{folder}/items.parquet: no items yet; run the 00_items or 02_score notebook first")
    stages_path = folder / "stages.parquet"
    stages = pd.read_parquet(stages_path) if stages_path.exists() else pd.DataFrame(
        columns=["source", "category", "stage", "n", "reason"])
    return pd.read_parquet(folder / "items.parquet"), pd.read_parquet(folder / "collapsed.parquet"), stages


def read_similarity(params) -> pd.DataFrame | None:
    """The run's similarity table (`params.similarity_file` in the run's folder, written by the translate
    step, by the import of the released scores, or brought by the user), or None where the run has none:
    the faithful-only analyses then say so."""
    path = run_dir(params.run_name) / params.similarity_file
    return pd.read_parquet(path) if path.exists() else None


def similarity_source(similarity: pd.DataFrame | None) -> str:
    """Where a run's similarity table comes from, as a phrase for the page."""
    if similarity is None:
        return ""
    if "kind" in similarity and similarity["kind"].eq(RELEASED_SIMILARITY).any():
        return "the release's own check of each translation (validation_results.json: back-translation similarity)"
    return "the similarity table of chapter 01"


def read_llm_rewordings(params) -> pd.DataFrame:
    """The release's LLM rewordings' scores (imported with the released scores; kept out of the run's scores,
    as no route of the floor), or an empty table."""
    path = run_dir(params.run_name) / LLM_FILE
    return pd.read_parquet(path) if path.exists() else pd.DataFrame()


def read_judgments(params) -> pd.DataFrame | None:
    """The release's contrast judgments of the run's translations (imported with the released scores), or None."""
    path = run_dir(params.run_name) / JUDGMENTS_FILE
    return pd.read_parquet(path) if path.exists() else None


def read_scores(run_name: str, *, models: list[str] | None = None, scorer_boundary: bool = False) -> pd.DataFrame:
    """The scores a run's 02_score chapter stored, for the run's current items (and `models`, if given),
    ordered by model and then as the run's items are: the same table however the scoring was
    split into chunks or sessions. Beside the paper's ten, the run's own models are named as shown
    (`shown_model`: "<model> (this run)")."""
    folder = run_dir(run_name)
    store = ScoreStore(folder)
    if not store.exists():
        raise FileNotFoundError(f"{store.folder}: no scores yet; run the 02_score notebook (or `make book`) first")
    # the precision each row was scored in is the store's business (which rows a rerun reuses), not the table's
    scores = store.read(scorer_boundary=scorer_boundary).drop(columns=[DTYPE_COLUMN], errors="ignore")
    items = pd.read_parquet(folder / "items.parquet")
    own = own_models(run_name)
    shown = scores["model"].map(lambda m: shown_model(m, own))
    if models is not None:  # a model by its name or as shown
        scores = scores.loc[scores["model"].isin(models) | shown.isin(models)]
    scores = scores.assign(model=shown.loc[scores.index])
    return scores_in_item_order(scores, items["item_id"])


def scores_in_item_order(scores: pd.DataFrame, item_ids: pd.Series) -> pd.DataFrame:
    """The scores of `item_ids` only, ordered by model and then as the ids are: the order a run of
    those items stores its scores in, on which seeded tests depend."""
    position = pd.Series(np.arange(len(item_ids)), index=pd.Index(item_ids))
    scores = scores.loc[scores["item_id"].isin(position.index)]
    order = np.lexsort((scores["item_id"].map(position).to_numpy(), scores["model"].to_numpy()))
    return scores.iloc[order].reset_index(drop=True)


def read_precisions(run_name: str, models: list[str]) -> pd.DataFrame:
    """How many of the run's current item versions each model's stored scores hold in each precision
    (model, precision, versions; precision "not recorded" for rows stored before it was), so that a
    page can say what the scores were computed in and never mix precisions silently."""
    folder = run_dir(run_name)
    scores = ScoreStore(folder).read(scorer_boundary=False)
    if scores.empty:
        return pd.DataFrame(columns=["model", "precision", "versions"])
    items = pd.read_parquet(folder / "items.parquet", columns=["item_id"])
    scores = scores.loc[scores["item_id"].isin(items["item_id"]) & scores["model"].isin(models)]
    stored_in = scores[DTYPE_COLUMN] if DTYPE_COLUMN in scores else pd.Series(None, index=scores.index, dtype=object)
    counts = scores.assign(precision=stored_in.fillna("not recorded")).groupby(["model", "precision"]).size()
    return counts.rename("versions").reset_index()


def rerun_with_errors(
    run_name: str,
    items: pd.DataFrame,
    *,
    models: list[str],
    sources: list[str],
    data_dir: str = "",
    stereoset_per_category: int = 50,
    bbq_per_category: int = 30,
    seed: int = DEFAULT_SEED,
    batch_size: int = 16,
    device: str | None = None,
    spec: EngineSpec | None = None,
    ray_options: RayOptions | None = None,
) -> pd.DataFrame:
    """Rerun the real pipeline on `items` under all eight combinations of the three errors.

    `items` are correct item versions (e.g. `rescore_subset` of a run's items). Their StereoSet
    and BBQ rows are loaded again through `load_sources` with `stereoset_label_map` and
    `bbq_roles_by_order` switched on or off (the loaders keep the same items either way; `sources`,
    `data_dir`, the per-category sizes and `seed` must be those the items were loaded with); the
    written rows are unchanged by those two errors. Each setting is then scored with
    `score_run` without and with `scorer_boundary`: correct items are scored (or found in the
    run's stored scores, which keep every scored version under both settings), and a permuted item takes the log-probs of its texts (`scores_by_text`).
    Returns the stacked scores tables with the flag columns `label_errors` reads.
    """
    scored = {boundary: score_run(run_name, items, models=models, batch_size=batch_size, device=device,
                                  scorer_boundary=boundary, spec=spec, ray_options=ray_options)[0]
              for boundary in (False, True)}
    public = items["source"].isin(["stereoset", "bbq"])
    frames = []
    for label_map in (False, True):
        for roles_by_order in (False, True):
            version = items
            if public.any() and (label_map or roles_by_order):
                loaded, _ = load_sources(
                    sources, data_dir=data_dir, stereoset_per_category=stereoset_per_category,
                    bbq_per_category=bbq_per_category, seed=seed, stereoset_label_map=label_map,
                    bbq_roles_by_order=roles_by_order)
                loaded = loaded.loc[loaded["item_id"].isin(items.loc[public, "item_id"])]
                if len(loaded) != int(public.sum()):
                    raise ValueError(
                        f"reloading the sources with the errors gave {len(loaded)} of the {int(public.sum())} "
                        "StereoSet/BBQ items; pass the sources, data_dir, sizes and seed they were loaded with")
                version = pd.concat([items.loc[~public, ITEM_COLUMNS], loaded[ITEM_COLUMNS]], ignore_index=True)
            for boundary in (False, True):
                table, missing = scores_by_text(version, scored[boundary])
                if len(missing):
                    raise ValueError(f"{counted(len(missing), 'item version')} {'has' if len(missing) == 1 else 'have'} texts "
                                     "that were never scored, e.g. "
                                     f"{missing['item_id'].head(3).tolist()}")
                frames.append(table.assign(stereoset_label_map=label_map, bbq_roles_by_order=roles_by_order,
                                           scorer_boundary=boundary))
    return pd.concat(frames, ignore_index=True)


def scores_by_text(items: pd.DataFrame, scored: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores of `items` taken from an already scored table by text, not by role.

    A log-prob depends on the model, the context, the continuation's text and the language only,
    so when a pipeline error permutes which continuation plays which role (errors 1 and 2), the
    permuted item needs no new forward pass: each of its options gets the log-probs of the scored
    option with the same item id, context and text. Returns (scores with the item's own columns
    and roles, items with at least one option that `scored` lacks for some model; score those).
    """
    long = []
    for option in ("stereotyped", "anti_stereotyped", "third"):
        part = scored[["model", "item_id", "context", "language", option, f"lp_sum_{option}", f"ntok_{option}",
                       f"lp_mean_{option}"]]
        long.append(part.set_axis(["model", "item_id", "context", "language", "text", "lp_sum", "ntok", "lp_mean"],
                                  axis=1))
    lookup = pd.concat(long, ignore_index=True).drop_duplicates(["model", "item_id", "context", "language", "text"])
    models = sorted(scored["model"].unique())
    out = items[ITEM_COLUMNS].merge(pd.DataFrame({"model": models}), how="cross")
    complete = pd.Series(True, index=out.index)
    for option in ("stereotyped", "anti_stereotyped", "third"):
        found = out[["model", "item_id", "context", "language", option]].rename(columns={option: "text"}).merge(
            lookup, on=["model", "item_id", "context", "language", "text"], how="left")
        for kind in ("lp_sum", "ntok", "lp_mean"):
            out[f"{kind}_{option}"] = found[kind].to_numpy()
        complete &= found["lp_mean"].notna().to_numpy()
    missing = items.loc[items["item_id"].isin(out.loc[~complete, "item_id"])]
    out = out.loc[complete, ["model", *ITEM_COLUMNS, *[c for c in out.columns if c.startswith(("lp_", "ntok_"))]]]
    return out.reset_index(drop=True), missing.reset_index(drop=True)


def rescore_subset(
    items: pd.DataFrame,
    *,
    languages: list[str],
    routes: list[str],
    per_category: int,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """The item versions the label-error chapter rescores: every written base item and a seeded
    sample of `per_category` StereoSet and BBQ base items per category (0: none), each with its
    English original, its translations into `languages` and its English rewordings by `routes`."""
    originals = items.loc[items["variant"] == "original"]
    chosen = list(originals.loc[~originals["source"].isin(["stereoset", "bbq"]), "base_id"])
    public = originals.loc[originals["source"].isin(["stereoset", "bbq"])]
    for key, group in public.groupby(["source", "category"], sort=True):
        rng = np.random.default_rng([seed, stats.group_seed_key(("rescore_subset", *key))])
        bases = np.sort(group["base_id"].unique())
        chosen += list(rng.choice(bases, size=min(per_category, len(bases)), replace=False)) if per_category else []
    keep = items["base_id"].isin(chosen) & (
        (items["variant"] == "original")
        | ((items["variant"] == "translation") & items["language"].isin(languages))
        | ((items["variant"] == "rewording") & (items["language"] == "en") & items["via"].isin(routes)))
    return items.loc[keep].reset_index(drop=True)


@dataclass(frozen=True)
class AblationPlan:
    """What the pipeline-error chapter reruns on this run: the item versions, the models, and how to
    reload their public-source rows with the errors switched on (`rerun_with_errors`)."""

    items: pd.DataFrame
    models: list[str]
    sources: list[str]
    data_dir: str
    sizes: tuple[int, int]
    text: str


def ablation_plan(params, items: pd.DataFrame, models: list[str]) -> AblationPlan:
    """Decide what can be rescored with the errors (`params`: `biasaudit.run.params.RunParams`).

    Rescoring needs the items' texts. Errors 1 and 2 need StereoSet or BBQ items: the run's own,
    else `source_items` per category from the mirror folder when one is set. Every written base item
    is rescored in English, in `rescore_languages` and in the English rewordings of `rescore_routes`.
    """

    empty = items.iloc[0:0]
    own = [model for model in models if model.endswith(THIS_RUN)]  # scored here beside the paper's models
    unknown = []
    for model in models:
        try:
            check_model_name(model.removesuffix(THIS_RUN))
        except ValueError:
            unknown.append(model)
    if unknown:
        whose = "The paper's models" if own else "This run's models"
        beside = (f" {', '.join(own)} could be rescored: a run of {'it' if len(own) == 1 else 'them'} without the "
                  "released scores shows the errors on it." if own else "")
        return AblationPlan(empty, models, [], "", (0, 0), (
            f"{whose} ({', '.join(unknown)}) are names of scores this run read, not models that can be "
            "loaded here, so nothing is rescored: the label errors are shown on the released scores below (when "
            f"they are at hand), and the scorer error is described only.{beside}"))
    if not items[["stereotyped", "anti_stereotyped", "third"]].notna().all().all():
        return AblationPlan(empty, models, [], "", (0, 0), (
            f"This run's items carry no continuation texts (the paper's released scores are of this kind), and its "
            f"models ({', '.join(models)}) cannot be run here, so nothing can be rescored: the label errors are shown "
            "on the released scores below, and the scorer error is described only."))
    mirror = resolve_data_dir(params.data_dir or None)
    run_sources = sorted(set(items["source"]) & {"stereoset", "bbq"})
    sample = empty
    if run_sources:
        sources, data_dir = run_sources, params.data_dir
        sizes = (params.stereoset_per_category, params.bbq_per_category)
        text = (f"This run has {' and '.join(run_sources)} items; {params.source_items} per category are reloaded with "
                "each error switched on and rescored, with the written items.")
    elif mirror is not None:
        sources, data_dir, sizes = ["stereoset", "bbq"], str(mirror), (params.source_items, params.source_items)
        sample, _ = load_sources(sources, data_dir=data_dir, stereoset_per_category=params.source_items,
                                 bbq_per_category=params.source_items, seed=params.seed)
        text = (f"This run has no StereoSet or BBQ items, so errors 1 and 2 change nothing in it. To show them, "
                f"{len(sample)} English StereoSet and BBQ items ({params.source_items} per category) are taken from "
                f"the mirror in {mirror} and scored alongside the run's own items.")
    else:
        sources, data_dir, sizes = [], params.data_dir, (0, 0)
        text = ("This run has no StereoSet or BBQ items and no mirror folder is set ($BIASAUDIT_DATA_DIR or data_dir), "
                "so errors 1 and 2 cannot be shown on this run's items: they change nothing here. Set the mirror, or "
                "run with params/sources.yml, to see them; the released scores below show them on real data.")
    subset = rescore_subset(pd.concat([items, sample], ignore_index=True), languages=list(params.rescore_languages),
                            routes=list(params.rescore_routes), per_category=params.source_items, seed=params.seed)
    return AblationPlan(subset, models, sources, data_dir, sizes, text)


# --- the steps chapters 02 and 20 run before their report reads --------------------------------------

TIMING_COLUMNS: list[str] = ["model", "scored_now", "read_back", "seconds", "batch_size", "load_seconds", "engine",
                              "executor", "actors", "shards_retried"]


def run_scoring(params) -> StepTables:
    """Chapter 02's step: prepare the run's items (or import the released scores) and score them with
    every model; the scores go to the run's score store, the timings to the step's table."""
    params.require_models("the scoring chapter's parameters")
    prepare_run(params)
    if params.beside_paper:
        own = pd.read_parquet(run_dir(params.run_name) / OWN_ITEMS_FILE)
        _, timings = score_run(params.run_name, own, models=list(params.models),
                               spec=EngineSpec.from_params(params), ray_options=RayOptions.from_params(params))
    elif params.released_scores:
        timings = pd.DataFrame(columns=TIMING_COLUMNS)
    else:
        items, _, _ = read_run_items(params.run_name)
        _, timings = score_run(params.run_name, items, models=list(params.models),
                               spec=EngineSpec.from_params(params), ray_options=RayOptions.from_params(params))
    made = StepTables({"timings": timings}, {})
    write_step(params, "score", made)
    return made


def run_error_reruns(params) -> StepTables:
    """Chapter 20's step: rerun the pipeline on the planned items under all eight combinations of the
    three errors (`ablation_plan`, `rerun_with_errors`); the new scores go to the run's score store."""
    items, _, _ = read_run_items(params.run_name)
    scores = read_scores(params.run_name, models=params.model_filter)
    plan = ablation_plan(params, items, sorted(scores["model"].unique()))
    reruns = rerun_with_errors(params.run_name, plan.items, models=plan.models, sources=plan.sources,
                               data_dir=plan.data_dir, stereoset_per_category=plan.sizes[0],
                               bbq_per_category=plan.sizes[1], seed=params.seed, batch_size=params.batch_size,
                               device=params.device_or_none, spec=EngineSpec.from_params(params),
                               ray_options=RayOptions.from_params(params)) if not plan.items.empty else pd.DataFrame()
    made = StepTables({"plan_items": plan.items, "reruns": reruns},
                      {"plan_text": plan.text, "rerun": not plan.items.empty})
    write_step(params, "label_errors", made)
    return made
