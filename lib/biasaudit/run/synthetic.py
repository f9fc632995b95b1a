"""Study-sized data without a study: a synthetic release in the paper's file layout and a synthetic
run's scores, for the scale tests and the benchmarks (no model is run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from biasaudit.core.paths import run_dir
from biasaudit.core.store import ScoreStore
from biasaudit.data.item_table import ITEM_COLUMNS, OPTIONS
from biasaudit.run import pipeline

LOGPROB_COLUMNS: tuple[str, str, str] = ("logprob_stereotype", "logprob_anti_stereotype", "logprob_unrelated")


def synthetic_release(source: Path, target: Path, *, n_models: int = 10, noise_sd: float = 0.15,
                      seed: int = 0) -> list[str]:
    """Write a release of `n_models` made-up models in the paper's file layout, from one real model's.

    Each model `synthetic-<k>` is the source model's log-probs plus seeded Gaussian noise (the same
    draw for the same prompt wherever it appears, so the noise files' English rows still equal the
    item files'; a collapsed contrast stays collapsed), with stereotype_score recomputed. Same
    schema, same file names (`<model>_checkpoint.csv`, `<model>_noise_floor.csv`), and
    label_fix.json copied: every reader and chapter runs on it as on the real release. Returns the
    model names.
    """
    source, target = Path(source), Path(target)
    target.mkdir(parents=True, exist_ok=True)
    items = next(source.glob("*_checkpoint.csv"))
    noise = next(source.glob("*_noise_floor.csv"))
    raw_items = pd.read_csv(items, dtype=str, keep_default_na=False)
    raw_noise = pd.read_csv(noise, dtype=str, keep_default_na=False)
    keys = pd.Index(sorted(set(raw_items["prompt_id"] + "|none") | set(raw_noise["prompt_id"] + "|" + raw_noise["pivot"]
                                                                       + "|" + raw_noise["seed"])))
    names = []
    for k in range(n_models):
        name = f"synthetic-{k + 1:02d}"
        names.append(name)
        draws = np.random.default_rng([seed, k]).normal(0.0, noise_sd, size=(len(keys), 3))
        shift = np.random.default_rng([seed, k, 1]).normal(0.0, noise_sd)  # each model leans its own way
        for table, key, path in ((raw_items, raw_items["prompt_id"] + "|none", f"{name}_checkpoint.csv"),
                                 (raw_noise, raw_noise["prompt_id"] + "|" + raw_noise["pivot"] + "|" + raw_noise["seed"],
                                  f"{name}_noise_floor.csv")):
            key = key.where(~((table.get("pivot", pd.Series("none", index=table.index)) == "none")),
                            table["prompt_id"] + "|none")
            rows = keys.get_indexer(key)
            out = table.copy()
            out["model"] = name
            values = {c: pd.to_numeric(table[c]).to_numpy() for c in LOGPROB_COLUMNS}
            collapsed = values["logprob_stereotype"] == values["logprob_anti_stereotype"]
            noisy_s = values["logprob_stereotype"] + draws[rows, 0] + shift
            noisy_a = np.where(collapsed, noisy_s, values["logprob_anti_stereotype"] + draws[rows, 1])
            noisy_u = values["logprob_unrelated"] + draws[rows, 2]
            for column, value in zip(LOGPROB_COLUMNS, (noisy_s, noisy_a, noisy_u)):
                out[column] = np.round(np.minimum(value, 0.0), 6)  # still log-probs: at most 0
            out["stereotype_score"] = np.round(1 / (1 + np.exp(-(out[LOGPROB_COLUMNS[0]] - out[LOGPROB_COLUMNS[1]]))), 6)
            out.to_csv(target / path, index=False)
    shutil.copy(source / "label_fix.json", target / "label_fix.json")
    return names


def synthetic_scores(items, models: list[str], *, seed: int = 0):
    """A scores table for `items` and made-up `models`: each item has its own preference, a model
    keeps part of it in each version, and versions add noise (translations more than rewordings),
    with token counts from the texts. For tests and benchmarks at study scale; no model is run."""
    bases = pd.Index(np.sort(items["base_id"].unique()))
    frames = []
    for k, model in enumerate(models):
        rng = np.random.default_rng([seed, k])
        preference = rng.normal(0.3, 0.8, size=len(bases))[bases.get_indexer(items["base_id"])]
        keep = np.where(items["variant"] == "original", 1.0, np.where(items["variant"] == "translation", 0.4, 0.7))
        spread = np.where(items["variant"] == "translation", 0.6, np.where(items["variant"] == "rewording", 0.3, 0.0))
        contrast = keep * preference + rng.normal(0.0, 1.0, size=len(items)) * spread
        anti = rng.normal(-3.0, 0.5, size=len(items)) - np.maximum(contrast, 0.0)  # both options stay below 0
        table = items[ITEM_COLUMNS].reset_index(drop=True).copy()
        table.insert(0, "model", model)
        means = {"stereotyped": anti + contrast, "anti_stereotyped": anti, "third": anti - rng.gamma(2.0, 1.0, len(items))}
        for option in OPTIONS:
            ntok = np.maximum(1, table[option].fillna("").str.len().to_numpy() // 4)
            table[f"lp_sum_{option}"] = means[option] * ntok
            table[f"ntok_{option}"] = ntok
            table[f"lp_mean_{option}"] = means[option]
        table["scorer_boundary"] = False
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def write_synthetic_run(run_name: str, params, models: list[str], *, seed: int = 0) -> None:
    """Prepare a run's items as `params` (`RunParams`) say and store synthetic scores for `models`."""
    pipeline.prepare_run(params.model_copy(update={"run_name": run_name}))
    items, _, _ = pipeline.read_run_items(run_name)
    store = ScoreStore(run_dir(run_name))
    store.clear()
    store.append(synthetic_scores(items, models, seed=seed))
