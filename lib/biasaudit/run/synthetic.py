"""Study-sized data without a study: a synthetic release in the paper's file layout and a synthetic
run's scores, for the scale tests and the benchmarks (no model is run)."""

from __future__ import annotations

import json
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


# The shape of the paper's release (HarshKumar3014/MultiLLMs, results/v2): English bases per category
# (the handcrafted ones under the paper's own id prefixes), the eight languages as the files write them,
# the three round-trip pivots with the seed each was drawn with.
RELEASE_CATEGORIES: dict[str, tuple[str, int]] = {
    "stereoset_profession": ("ss", 50), "stereoset_race": ("ss", 50), "stereoset_gender": ("ss", 50),
    "stereoset_religion": ("ss", 50), "bbq_Age": ("bbq_Age", 30), "bbq_Gender_identity": ("bbq_Gender_identity", 30),
    "bbq_Race_ethnicity": ("bbq_Race_ethnicity", 30), "bbq_Religion": ("bbq_Religion", 30),
    "bbq_Nationality": ("bbq_Nationality", 30), "gender_profession": ("gp", 15), "race_trait": ("rt", 7),
    "gender_trait": ("gt", 5), "age_competence": ("ac", 5), "religion": ("re", 5),
}
RELEASE_LANGUAGES: tuple[str, ...] = ("en", "es", "fr", "zh-CN", "ar", "ko", "sw", "hi")
# The languages the paper also reworded within themselves (its Table 15).
WITHIN_LANGUAGES: tuple[str, ...] = ("hi", "es")
RELEASE_PIVOTS: dict[str, int] = {"de": 0, "ja": 1, "fi": 2}
# How far each language's made-up scores lean below English (soft-score units, roughly): three clear
# shifts and four languages within the rewording scatter, so every verdict has rows to show.
_MADE_UP_SHIFT: dict[str, float] = {"es": 0.02, "fr": 0.0, "zh-CN": 0.03, "ar": 0.04, "ko": 0.25, "sw": 0.35,
                                    "hi": 0.3}


def made_up_release(target: Path, models: tuple[str, ...] | list[str], *, fraction: float = 1.0,
                    seed: int = 0) -> list[str]:
    """Write a release in the paper's file layout with made-up numbers and no source files at all: the
    item, noise-floor and within-language rewording files of each of `models`, label_fix.json, made-up
    texts of every version (prompts.json, noise_floor_paraphrases.json), and the paper's ablation and
    spike-in tables (pipeline_ablation.csv, spike_in_null.csv).

    For checking the released part at the study's shape (every category, language, pivot and model the
    paper has; `fraction` of its 387 English bases per category, at least two) where the real files
    are not at hand. Every number is invented: StereoSet rows are stored with their two contrasting
    columns swapped and BBQ rows as they are, as label_fix.json (also written here) says, two BBQ items
    are dropped by it, and a few translations collapse (equal log-probs for all models). Returns the
    models written.
    """
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, 7])
    bases: list[tuple[str, str]] = []  # (base id, category)
    for category, (prefix, count) in RELEASE_CATEGORIES.items():
        n = max(2, round(count * fraction))
        start = len([b for b, c in bases if b.startswith(prefix)])
        width = 4 if prefix == "ss" else 3
        bases += [(f"{prefix}_{start + i:0{width}d}", category) for i in range(n)]
    ids = [b for b, _ in bases]
    stereoset = [b for b, c in bases if c.startswith("stereoset_")]
    bbq = [b for b, c in bases if c.startswith("bbq_")]
    swap = {"stereotype": "anti_stereotype", "anti_stereotype": "stereotype", "unrelated": "unrelated"}
    same = {role: role for role in swap}
    mapping: dict[str, dict[str, str] | None] = {b: swap for b in stereoset}
    mapping.update({b: same for b in bbq})
    mapping.update({b: None for b in bbq[:: max(1, len(bbq) // 2)][:2]})
    preference = rng.normal(0.25, 0.6, size=len(ids))
    collapsed = rng.random((len(ids), len(RELEASE_LANGUAGES))) < 0.01
    collapsed[:, 0] = False
    (target / "label_fix.json").write_text(json.dumps({"map": mapping}, indent=1), encoding="utf-8")
    _made_up_texts(target, bases, mapping, collapsed)
    for k, model in enumerate(models):
        draw = np.random.default_rng([seed, k])
        lean = draw.normal(0.0, 0.15)
        english = preference + lean
        rows, noise = [], []
        for j, language in enumerate(RELEASE_LANGUAGES):
            if language == "en":
                contrast = english
            else:
                contrast = 0.5 * english + draw.normal(0.0, 0.5, len(ids)) - 4 * _MADE_UP_SHIFT[language]
            for i, (base, category) in enumerate(bases):
                rows.append(_made_up_row(draw, model, f"{base}_{language}", contrast[i], collapsed[i, j],
                                         mapping.get(base), base_prompt_id=base, language=language,
                                         category=category, layer="A",
                                         context=f"Context of {base} in {language}."))
        english_rows = {r["prompt_id"]: r for r in rows if r["language"] == "en"}
        for i, base in enumerate(ids):
            noise.append(english_rows[f"{base}_en"] | {"seed": -1, "pivot": "none"})
            for pivot, pivot_seed in RELEASE_PIVOTS.items():
                contrast = 0.8 * english[i] + draw.normal(0.0, 0.3)
                noise.append(_made_up_row(draw, model, f"{base}_en", contrast, False, mapping.get(base),
                                          seed=pivot_seed, pivot=pivot))
        # within-language rewordings of the Hindi and Spanish translations (every other base): close to them
        translated = {r["prompt_id"]: r for r in rows if r["language"] in WITHIN_LANGUAGES}
        within = []
        for j, language in enumerate(RELEASE_LANGUAGES):
            if language not in WITHIN_LANGUAGES:
                continue
            for i, (base, _) in list(enumerate(bases))[::2]:
                kept = translated[f"{base}_{language}"]
                within.append(_made_up_row(draw, model, f"{base}_{language}", contrast_of(kept, mapping.get(base))
                                           + draw.normal(0.0, 0.2), collapsed[i, j], mapping.get(base),
                                           condition="rw_target", base_prompt_id=base, language=language))
        pd.DataFrame(within)[["model", "condition", "prompt_id", "base_prompt_id", "language", *LOGPROB_COLUMNS,
                              "stereotype_score"]].to_csv(target / f"{model}_within_language.csv", index=False)
        pd.DataFrame(rows).to_csv(target / f"{model}_checkpoint.csv", index=False)
        pd.DataFrame(noise)[["model", "prompt_id", "seed", "pivot", *LOGPROB_COLUMNS, "stereotype_score"]] \
            .to_csv(target / f"{model}_noise_floor.csv", index=False)
    ablation = [{"scorer": scorer, "labels": labels, "en_ss": 0.5 + 0.01 * n, "en_bin": 0.45 + 0.05 * n,
                 "neg": 30 + 10 * n, "sig": 7 * n, "sig_raw": 8 * n, "gap_lo": 0.005 * (1 + n),
                 "gap_hi": 0.015 * (1 + n), "slope_tr": 0.2 + 0.02 * n, "slope_rw": 0.45 + 0.05 * n,
                 "inf_rows": 890 if scorer == "v1" else 0}
                for n, (scorer, labels) in enumerate([("v1", "raw"), ("v1", "fixed"), ("v2", "raw"), ("v2", "fixed")])]
    pd.DataFrame(ablation).to_csv(target / "pipeline_ablation.csv", index=False)
    deltas = [0.0, 0.1, 0.15, 0.2, 0.3, 0.5]
    pd.DataFrame({"delta": deltas, "shift": [d / 5 for d in deltas], "power": [min(1.0, 2 * d) for d in deltas],
                  "fa_rate": 0.0, "runs": 200}).to_csv(target / "spike_in_null_200.csv", index=False)
    _made_up_inputs(target, models, bases, rng)
    return list(models)


def _made_up_texts(target: Path, bases: list[tuple[str, str]], mapping: dict, collapsed: np.ndarray) -> None:
    """prompts.json and noise_floor_paraphrases.json in the release's formats: made-up texts for every version
    the score files hold (the same contexts), each continuation stored in the column label_fix.json says, the
    two contrasting ones the same text where the scores collapse."""
    def stored(base: str, texts: dict[str, str]) -> dict[str, str]:
        roles = mapping.get(base) or {role: role for role in texts}
        return {roles[role]: text for role, text in texts.items()}

    def texts(base: str, tag: str, same: bool) -> dict[str, str]:
        anti = f"The other one did it, {tag}."
        return {"stereotype": anti if same else f"The usual one did it, {tag}.", "anti_stereotype": anti,
                "unrelated": f"Rain fell on the {base} roof, {tag}."}

    prompts = []
    for j, language in enumerate(RELEASE_LANGUAGES):
        for i, (base, category) in enumerate(bases):
            prompts.append({"id": f"{base}_{language}", "base_id": base, "language": language, "category": category,
                            "layer": "A", "source": "made up", "context": f"Context of {base} in {language}.",
                            **stored(base, texts(base, language, bool(collapsed[i, j])))})
    (target / "prompts.json").write_text(json.dumps(prompts, indent=1), encoding="utf-8")
    rewordings = {str(seed): {f"{base}_en": {"pivot": pivot, "context": f"Reworded context of {base} via {pivot}.",
                                             **stored(base, texts(base, f"en via {pivot}", False))}
                              for base, _ in bases}
                  for pivot, seed in RELEASE_PIVOTS.items()}
    (target / "noise_floor_paraphrases.json").write_text(json.dumps(rewordings, indent=1), encoding="utf-8")


def _made_up_inputs(target: Path, models, bases: list[tuple[str, str]], rng: np.random.Generator) -> None:
    """The release's other files, in their formats, with made-up content: token counts, the translation
    checks, the LLM rewordings' scores and the paper's summary numbers (paper_numbers.json,
    robustness_checks.json, bootstrap_dfg_minus_floor.csv, review3_checks.json, translation_quality.json,
    association_and_dimensions.json, review2_checks.json, review_runs.json), so
    that every reader and every comparison on the released pages runs."""
    versions = [(base, language) for base, _ in bases for language in RELEASE_LANGUAGES]
    counts = [{"model": model, "prompt_id": f"{base}_{language}", "n_stereotype": int(rng.integers(3, 15)),
               "n_anti_stereotype": int(rng.integers(3, 15))} for model in models for base, language in versions]
    pd.DataFrame(counts).to_csv(target / "token_counts.csv", index=False)
    translated = [(b, lang) for b, lang in versions if lang != "en"]
    similarity = np.round(rng.uniform(0.6, 1.0, len(translated)), 4)
    (target / "validation_results.json").write_text(json.dumps({
        f"{b}_{lang}": {"similarity": float(s), "original": f"Context of {b} in en.", "back_translated": f"Made up {b}.",
                        "passed": bool(s >= 0.85)} for (b, lang), s in zip(translated, similarity)}, indent=1),
        encoding="utf-8")
    judgment = rng.choice(["preserved", "partly", "lost"], p=[0.7, 0.28, 0.02], size=len(translated))
    pd.DataFrame({"language": [lang for _, lang in translated], "prompt_id": [f"{b}_{lang}" for b, lang in translated],
                  "source": "made up", "en_stereotype": "", "en_anti": "", "tr_stereotype": "", "tr_anti": "",
                  "judgment": judgment, "note": "", "judge": "made up for the tests"}
                 ).to_csv(target / "contrast_judgment_full.csv", index=False)
    for model in models:
        noise = pd.read_csv(target / f"{model}_noise_floor.csv")
        llm = noise.loc[noise["pivot"] == "de"].head(max(2, len(bases) // 4)).assign(pivot="llm", seed=3)
        llm.to_csv(target / f"{model}_noise_floor_llm.csv", index=False)
    languages = [lang for lang in RELEASE_LANGUAGES if lang != "en"]
    (target / "paper_numbers.json").write_text(json.dumps({
        "en_mean_ss": 0.5, "en_binary_ss": 0.6, "cells": {"n_sig_bh05": 20, "n_sig_bh05_binary": 20},
        "gap_by_language": {lang: {"mean_d": -0.02, "lo": -0.03, "hi": -0.01, "n_sig": 3, "n_neg": 10,
                                   "n_sig_bin": 3} for lang in languages},
        "floor": {"median_floor": 0.0075, "median_floor_by_pivot": dict.fromkeys(RELEASE_PIVOTS, 0.008),
                  "n_sig_bh05": 0},
        "extra_pivot": {via: {"floor": 0.005, "median_abs_d": 0.035, "sd_d": 0.085}
                        for via in (*RELEASE_PIVOTS, "llm")},
        "fidelity": {"share_identical_by_pivot": {"de": 0.28, "fi": 0.16, "ja": 0.09},
                     "cos_by_pivot_field_mean": {
                         pivot: dict.fromkeys(("context", "stereotype", "anti_stereotype"), 0.92)
                         for pivot in RELEASE_PIVOTS}},
        "slope_cross": 0.26, "slope_para": 0.66, "corr_cross": 0.23, "corr_para": 0.48,
        "slope_by_lang": dict.fromkeys(languages, 0.3), "slope_by_pivot": dict.fromkeys(RELEASE_PIVOTS, 0.7),
        "agree_by_lang": dict.fromkeys(languages, 0.6), "agree_by_pivot": dict.fromkeys(RELEASE_PIVOTS, 0.7),
        "en_soft_by_model": dict.fromkeys(models, 0.53), "en_bin_by_model": dict.fromkeys(models, 0.63),
        "bootstrap": {"n_ci_above_0": 4},
    }, indent=1), encoding="utf-8")
    made_up = {lang: {kind: int((judgment[[lg == lang for _, lg in translated]] == kind).sum())
                      for kind in ("preserved", "partly", "lost")} for lang in languages}
    tested = {"items": 30, "drop": 0.02, "beyond": 0.02, "lo": 0.005, "hi": 0.035, "p": 0.01, "q": 0.02}
    carried = {"r": 0.25, "r_lo": 0.2, "r_hi": 0.3, "sd_ratio": 1.1, "slope": 0.28, "slope_lo": 0.22, "slope_hi": 0.34,
               "n_items": 30, "n_pairs": 300}
    (target / "translation_quality.json").write_text(json.dumps({"judgments": {
        "by_lang": made_up, "total": {kind: sum(c[kind] for c in made_up.values()) for kind in ("preserved", "partly",
                                                                                               "lost")}},
        "item_level": {subset: dict.fromkeys(languages, tested) for subset in ("all", "preserved", "not_lost")},
        "within": dict.fromkeys(WITHIN_LANGUAGES, carried),
        "association": {"preserved": {"pooled": carried, **dict.fromkeys(languages, carried)}}}, indent=1),
        encoding="utf-8")
    (target / "review2_checks.json").write_text(json.dumps({"faithful": {
        "drop_all_by_lang": dict.fromkeys(languages, 0.02), "drop_faithful_by_lang": dict.fromkeys(languages, 0.015),
        "ew_all": 0.02, "ew_faithful": 0.015, "reduction": 0.005, "reduction_ci": [-0.002, 0.011], "share": 0.25,
        "pairs_all": 2000, "pairs_faithful": 1300, "slope_all": 0.26, "slope_faithful": 0.29},
        "surface": {language: {"agree_raw": 0.45, "agree_len": 0.47, "r2_len": 0.08,
                               **({} if language in ("ko", "sw") else {"agree_len_freq": 0.46, "r2_len_freq": 0.1})}
                    for language in languages},
        "length_matched": {"pairs": 400, "drop": 0.024, "slope": 0.33, "drop_all": 0.021, "slope_all": 0.26}},
        indent=1),
        encoding="utf-8")
    (target / "review_runs.json").write_text(json.dumps({"within_language": {language: {
        "pairs": 200, "items": 20, "slope_within": 0.83, "agree_within": 0.83, "corr_within": 0.84,
        "floor_within": 0.004,
        "slope_cross_same_items": 0.16, "slope_en_rewording_same_items": 0.69} for language in WITHIN_LANGUAGES}},
        indent=1), encoding="utf-8")
    (target / "association_and_dimensions.json").write_text(json.dumps({
        "association": {"translated_all": carried, "reworded_all": carried,
                        **{f"lang_{code}": carried for code in languages},
                        **{f"pivot_{pivot}": carried for pivot in RELEASE_PIVOTS}},
        "by_dimension": {name: {"items": 10, "drop": 0.02, "lo": 0.0, "hi": 0.04, "r_tr": 0.2, "r_rw": 0.5,
                                "reversed": 0.2} for name in ("Gender", "Race/ethnicity", "Religion", "Profession")},
        "fate": {"translated": {"n": 1000, "kept": 0.45, "neutral": 0.32, "reversed": 0.23}}}, indent=1),
        encoding="utf-8")
    (target / "review3_checks.json").write_text(json.dumps({"by_source": {
        source: {"items": 10, "cells_negative": 50, "reliable": 5, "reliable_binary": 2, "slope_tr": 0.2, "slope_rw": 0.6,
                 "agree_tr": 0.6, "agree_rw": 0.7} for source in ("StereoSet", "BBQ", "Written", "BBQ+Written")}},
        indent=1), encoding="utf-8")
    pd.DataFrame({"model": list(models), "mean_dfg": 0.017, "floor": 0.008, "diff": 0.009, "diff_lo": -0.008,
                  "diff_hi": 0.021}).to_csv(target / "bootstrap_dfg_minus_floor.csv", index=False)
    (target / "robustness_checks.json").write_text(json.dumps({"summed": {
        "en_mean": 0.6, "cells_negative": 70, "n_sig_bh": 30, "drop_by_lang": dict.fromkeys(languages, 0.05),
        "sig_by_lang": dict.fromkeys(languages, 4), "slope": 0.25, "slope_by_lang": dict.fromkeys(languages, 0.3),
        "agree_by_lang": dict.fromkeys(languages, 0.6)},
        "llm_floor": {"sd": 0.097, "n_items": 10, "expected": 0.008, "observed_median": 0.005},
        "filters": {subset: {"n": n, "drop_by_lang": dict.fromkeys(languages, drop), "drop_equal_weight": drop,
                             "slope_pooled": 0.26}
                    for subset, n, drop in (("all", 2000, 0.02), ("faithful", 1300, 0.015),
                                            ("faithful_fluent_nobbq", 300, 0.015))}}, indent=1), encoding="utf-8")


def contrast_of(row: dict, roles: dict[str, str] | None) -> float:
    """The true stereotype − anti-stereotype log-prob difference of a made-up released row."""
    roles = roles or {role: role for role in ("stereotype", "anti_stereotype")}
    return row[f"logprob_{roles['stereotype']}"] - row[f"logprob_{roles['anti_stereotype']}"]


def _made_up_row(draw: np.random.Generator, model: str, prompt_id: str, contrast: float, collapsed: bool,
                 roles: dict[str, str] | None, **fields) -> dict:
    """One released row: log-probs whose stereotype − anti-stereotype difference is `contrast` (0 where
    collapsed), stored in the columns `roles` (label_fix.json's map) says hold them."""
    anti = draw.normal(-3.0, 0.5) - max(contrast, 0.0)
    true = {"stereotype": anti + (0.0 if collapsed else contrast), "anti_stereotype": anti,
            "unrelated": anti - draw.gamma(2.0, 1.0)}
    roles = roles or {role: role for role in true}
    stored = {f"logprob_{roles[role]}": round(min(value, 0.0), 6) for role, value in true.items()}
    score = 1 / (1 + np.exp(-(stored["logprob_stereotype"] - stored["logprob_anti_stereotype"])))
    return {"model": model, "prompt_id": prompt_id, **fields, **{c: stored[c] for c in LOGPROB_COLUMNS},
            "stereotype_score": round(float(score), 6)}
