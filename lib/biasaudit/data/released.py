"""The paper's released item scores, read into this project's scores table.

The paper "Lost in Translation" released its item-level scores in its public repository
(HarshKumar3014/MultiLLMs, folder MultilingualBiasAudit/): one `<model>_checkpoint.csv` per
model (every item version of the main set, "layer A", plus a few native probes, "layer B"),
one `noise_floor/<model>_noise_floor.csv` per model (English items reworded by round-trip
translation through a pivot language) and `data/label_fix.json` (the fix for the two label
errors its raw scores still carry). `read_released` maps them onto the scores table of
docs/design.md ("Scores") so that every analysis of the book runs on the study's own numbers;
`data.release_import.import_released` writes them as a run (runs/<run>/items.parquet, scores/,
collapsed.parquet) so that every chapter reads them like a run it scored itself.

How the released columns map onto the scores table:

- `model` is kept; `base_prompt_id` becomes `base_id` (the paper's id, e.g. `ss_1733`, so that
  rows can be looked up in the paper's own files); `item_id` is `<base_id>/<language>` for the
  main set and `<base_id>/en~<pivot>-s<seed>` for a rewording (the paper drew one round trip per
  pivot, de with seed 0, ja 1, fi 2, so the pivot alone names the route; the seed is kept in
  the id so that a release with several seeds per pivot still has unique ids).
- `language`: ISO 639-1 (`zh-CN` becomes `zh`).
- `category` (e.g. `stereoset_race`, `bbq_Race_ethnicity`, `gender_profession`) becomes
  `source` (`stereoset`, `bbq`, or `written` for the paper's own handcrafted items), the
  source's own `category` (`race`, `Race_ethnicity`, `gender_profession`) and a `dimension`
  pooled across sources (`race`, `gender`, ...).
- `variant`/`via`: English originals are `original`/`human`; translations `translation`/
  `released` (the paper's machine translations); rewordings `rewording`/`<pivot>` (`de`, `fi`,
  `ja`, or `llm` for the LLM-paraphrase subset). Layer-B probes, written natively in one
  language with no English original (kept out unless `layer_b=True`), are
  `translation`/`native`: they can never be paired with English, so no paired analysis uses
  them.
- `logprob_stereotype`, `logprob_anti_stereotype`, `logprob_unrelated` are per-token mean
  log-probs: they become `lp_mean_stereotyped`, `lp_mean_anti_stereotyped`, `lp_mean_third`.
  Summed log-probs and token counts were not released: `lp_sum_*` and `ntok_*` are NaN, and an
  analysis with `aggregate="sum"` says so instead of running.
- `third_kind` is `unknown` for BBQ (its third answer is "cannot be determined") and
  `unrelated` otherwise. The item files carry the context but not the continuation texts
  (those are in the repository's data/prompts.json): the text columns are empty unless a
  `prompts.json` lies in the folder read, in which case they are filled from it; a rewording's stay
  empty (its own texts are in noise_floor_paraphrases.json: `release_import.with_rewording_texts`).
- With `fix_labels=True` (the default) the three log-prob columns of every StereoSet and BBQ
  item are permuted as label_fix.json says (`map[base][role]` names the stored column that
  really holds `role`) and the 25 BBQ items whose roles cannot be recovered are dropped,
  leaving the paper's 362 English bases. `fix_labels=False` keeps the raw scores (a real-data
  case of the label-error chapter).
- A translated or reworded version whose two contrasting continuations came out as the same
  text is scored identically on both, so its stereotype and anti-stereotype log-probs are
  exactly equal; such collapsed versions are set aside (as the paper did, e.g. Spanish
  n = 349 of 362) and returned separately.
- The stored `stereotype_score` is checked against sigmoid(lp_s - lp_a) recomputed from the
  stored log-probs; rows that disagree are reported (a warning, and `Released.score_mismatches`).
- The noise-floor files repeat the English originals (`pivot` none, `seed` -1); they are checked
  against the item files' English rows and then dropped, so each English original is one row.
- Where a folder also holds a model's within-language rewordings (`<model>_within_language.csv`, or the
  repository's `results/v2/within_language_runs/<model>.csv` and `review_runs/<model>.csv`), their rows
  with condition `rw_target` (a Hindi or Spanish translation reworded in the same language by an LLM not
  audited, Aya-Expanse-32B) become `rewording`/`aya-expanse-32b` in that language, item id
  `<base_id>/<language>~aya-expanse-32b`, labels fixed like the item files' (the paper scored them from
  the same prompts.json). Their other rows (`nocontext`: StereoSet sentences scored without their
  context) are not read."""

from __future__ import annotations

import argparse
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from biasaudit.core.paths import project_path
from biasaudit.data.bbq import DIMENSION_OF_CATEGORY as BBQ_DIMENSIONS
from biasaudit.data.public import DATA_DIR_VARIABLE
from biasaudit.data.release_files import (
    LABEL_FIX_COMMIT,
    RELEASED_MODELS,
    WITHIN_LANGUAGE_SUFFIX,
    ReleasedDataError,
    fetch_released,
    released_cache,
    released_file,
)
from biasaudit.data.stereoset import DIMENSION_OF_BIAS_TYPE as STEREOSET_DIMENSIONS

ITEM_FILE_COLUMNS: tuple[str, ...] = (
    "model", "prompt_id", "base_prompt_id", "language", "category", "layer", "context",
    "logprob_stereotype", "logprob_anti_stereotype", "logprob_unrelated", "stereotype_score",
)
WITHIN_FILE_COLUMNS: tuple[str, ...] = (
    "model", "condition", "prompt_id", "base_prompt_id", "language", "logprob_stereotype", "logprob_anti_stereotype",
    "logprob_unrelated", "stereotype_score",
)
# The rewriter of the paper's within-language rewordings, the `via` of their rows.
WITHIN_REWRITER = "aya-expanse-32b"
NOISE_FILE_COLUMNS: tuple[str, ...] = (
    "model", "prompt_id", "seed", "pivot", "logprob_stereotype", "logprob_anti_stereotype",
    "logprob_unrelated", "stereotype_score",
)
ROLE_COLUMNS: dict[str, str] = {
    "stereotype": "logprob_stereotype",
    "anti_stereotype": "logprob_anti_stereotype",
    "unrelated": "logprob_unrelated",
}
SCORE_OPTIONS: dict[str, str] = {"stereotype": "stereotyped", "anti_stereotype": "anti_stereotyped",
                                 "unrelated": "third"}
SCORE_COLUMNS: list[str] = [
    f"{kind}_{option}" for option in ("stereotyped", "anti_stereotyped", "third")
    for kind in ("lp_sum", "ntok", "lp_mean")
]
# The paper's own handcrafted categories (and layer-B categories), pooled into dimensions.
WRITTEN_DIMENSIONS: dict[str, str] = {
    "gender_profession": "gender", "gender_trait": "gender", "gender_role": "gender",
    "race_trait": "race", "age_competence": "age", "age_hierarchy": "age",
    "religion": "religion", "religion_stereotype": "religion", "nationality_trait": "nationality",
    "caste_profession": "caste", "regional_stereotype": "region", "education_status": "education",
    "indigenous_stereotype": "indigeneity", "origin_stereotype": "origin", "tribal_stereotype": "tribe",
}
# The stored stereotype_score is rounded to 6 decimals, and so are the log-probs it is
# recomputed from (|d sigmoid| <= 0.25 |d contrast|): they agree to well within 2e-6.
SCORE_TOLERANCE: float = 2e-6


class ReleasedDataWarning(UserWarning):
    """Something in the released files deserves a look but does not stop the import."""


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@dataclass
class Released:
    """What `load_released` read: the scores table and what was set aside or flagged on the way."""

    scores: pd.DataFrame
    collapsed: pd.DataFrame
    score_mismatches: pd.DataFrame
    english_mismatches: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def released_models_in(folder: str | Path) -> list[str]:
    """The models whose item and noise-floor files both lie in `folder`, with label_fix.json beside
    them (an empty list: not a folder of released scores)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    item_files, noise_files, label_fix, _ = find_release_files(folder, None)
    if label_fix is None:
        return []
    with_floor = {p.name.split("_noise_floor")[0] for p in noise_files}
    return sorted(m for m in (_model_of(p, "_checkpoint.csv") for p in item_files
                              if p.name.endswith("_checkpoint.csv")) if m in with_floor)


def find_released() -> Path | None:
    """The released scores already on this machine, without downloading: the download cache
    (`python -m biasaudit.data.released` fills it), else $BIASAUDIT_DATA_DIR/released; None if neither."""
    candidates = [released_cache()]
    mirror = os.environ.get(DATA_DIR_VARIABLE)
    if mirror:
        candidates.append(project_path(mirror) / "released")
    return next((folder for folder in candidates if released_models_in(folder)), None)


def iso_language(code: str) -> str:
    """ISO 639-1 code of a released language tag: `zh-CN` -> `zh`, `en` -> `en`."""
    short = str(code).strip().replace("_", "-").split("-")[0].lower()
    if len(short) != 2 or not short.isalpha():
        raise ValueError(f"language {code!r} has no two-letter ISO 639-1 code")
    return short


def source_dimension_category(category: str) -> tuple[str, str, str]:
    """(source, dimension, the source's own category) of a released `category` value."""
    if category.startswith("stereoset_"):
        own = category[len("stereoset_"):]
        return "stereoset", STEREOSET_DIMENSIONS.get(own, own), own
    if category.startswith("bbq_"):
        own = category[len("bbq_"):]
        return "bbq", BBQ_DIMENSIONS.get(own, own.split("_")[0].lower()), own
    return "written", WRITTEN_DIMENSIONS.get(category, category.split("_")[0]), category


def _model_of(path: Path, suffix: str) -> str:
    return path.name[: -len(suffix)]


def find_release_files(path: Path, models: list[str] | None) -> tuple[list[Path], list[Path], Path | None, Path | None]:
    """(item files, noise-floor files, label_fix.json, prompts.json) under a folder or beside a file.

    Accepts the flat layout of the cache and of a data folder's released/ (docs/data.md) and the repository's
    own layout (results/v2/<model>_checkpoint.csv, results/v2/noise_floor/...).
    """
    if path.is_file():
        item_files, folder = [path], path.parent
    else:
        folder = path
        roots = [folder, folder / "results" / "v2", folder / "MultilingualBiasAudit" / "results" / "v2"]
        item_files = sorted(p for root in roots for p in root.glob("*_checkpoint.csv"))
        if not item_files:
            item_files = sorted(p for root in roots for p in root.glob("all_results.csv"))
    roots = [folder, folder / "noise_floor", folder / "results" / "v2" / "noise_floor",
             folder / "MultilingualBiasAudit" / "results" / "v2" / "noise_floor"]
    # <model>_noise_floor.csv only: <model>_noise_floor_llm.csv (the LLM rewordings) is Table 3's separate
    # comparison, never a route of the floor (`read_llm_rewordings`)
    noise_files = sorted({p for root in roots for p in root.glob("*_noise_floor.csv")})
    if path.is_file() and path.name.endswith("_checkpoint.csv"):
        # One model's item file: only that model's noise-floor file belongs with it.
        noise_files = [p for p in noise_files if p.name.split("_noise_floor")[0] == _model_of(path, "_checkpoint.csv")]
    if models is not None:
        item_files = [p for p in item_files if p.name == "all_results.csv"
                      or _model_of(p, "_checkpoint.csv") in models]
        noise_files = [p for p in noise_files if p.name.split("_noise_floor")[0] in models]

    def first(name: str) -> Path | None:
        for candidate in (folder / name, folder / "data" / name, folder / "MultilingualBiasAudit" / "data" / name,
                          folder.parent / name):
            if candidate.exists():
                return candidate
        return None

    return item_files, noise_files, first("label_fix.json"), first("prompts.json")


def _within_language_files(path: Path, models: list[str] | None) -> list[Path]:
    """The within-language rewordings' score files under a folder (flat, or in the repository's layout)."""
    folder = path if path.is_dir() else path.parent
    found = {p.name[: -len(WITHIN_LANGUAGE_SUFFIX)]: p for p in folder.glob(f"*{WITHIN_LANGUAGE_SUFFIX}")}
    for root in (folder, folder / "MultilingualBiasAudit"):
        for runs in ("within_language_runs", "review_runs"):
            for p in (root / "results" / "v2" / runs).glob("*.csv"):
                found.setdefault(p.stem, p)
    if path.is_file():
        models = [_model_of(path, "_checkpoint.csv")]
    return [found[m] for m in sorted(found) if models is None or m in models]


def read_release_csv(path: Path, required: Iterable[str]) -> pd.DataFrame:
    try:
        table = pd.read_csv(path, dtype={"prompt_id": str, "base_prompt_id": str, "language": str,
                                         "category": str, "layer": str, "pivot": str, "context": str},
                            keep_default_na=False, na_values={c: ["", "nan", "NaN"] for c in ROLE_COLUMNS.values()})
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ReleasedDataError(f"{path}: cannot be read as a released CSV: {err}") from err
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ReleasedDataError(
            f"{path}: missing column(s) {missing}; a released file has {list(required)} (and more). "
            "Is this the right file (results/v2/<model>_checkpoint.csv or noise_floor/<model>_noise_floor.csv)?"
        )
    for column in ROLE_COLUMNS.values():
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() & table[column].astype(str).ne("")
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            raise ReleasedDataError(f"{path}: row {row}, field {column!r}: {table[column].iloc[row - 2]!r} is not a number")
        table[column] = values.astype(float)
    table["_file"] = path.name
    table["_row"] = np.arange(len(table)) + 2  # CSV line of the row (line 1 is the header)
    return table


def read_label_fix(path: Path) -> dict[str, dict[str, str] | None]:
    """label_fix.json's `map`: base id -> {role: stored column that holds it} or None (drop)."""
    try:
        content = json.loads(Path(path).read_text(encoding="utf-8"))
        mapping = content["map"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ReleasedDataError(f"{path}: not a label_fix.json with a 'map' entry: {err}") from err
    for base, roles in mapping.items():
        if roles is None:
            continue
        if sorted(roles) != sorted(ROLE_COLUMNS) or sorted(roles.values()) != sorted(ROLE_COLUMNS):
            raise ReleasedDataError(f"{path}: map[{base!r}] = {roles} is not a permutation of {list(ROLE_COLUMNS)}")
    return mapping


def apply_label_fix(table: pd.DataFrame, mapping: dict[str, dict[str, str] | None], base: pd.Series) -> tuple[pd.DataFrame, int]:
    """Permute the three log-prob columns per base item as `mapping` says; drop items mapped to None.

    Returns (fixed table, rows dropped). Base items absent from the map (the paper's handcrafted
    items, layer B) are unchanged.
    """
    drop = base.map(lambda b: b in mapping and mapping[b] is None).to_numpy(dtype=bool)
    kept = table.loc[~drop].copy()
    kept_base = base.loc[~drop]
    stored = {role: kept[column].to_numpy(copy=True) for role, column in ROLE_COLUMNS.items()}
    for role, column in ROLE_COLUMNS.items():
        source = kept_base.map(lambda b, r=role: (mapping.get(b) or {}).get(r, r)).to_numpy()
        kept[column] = np.select([source == s for s in ROLE_COLUMNS], [stored[s] for s in ROLE_COLUMNS],
                                 default=np.nan)
    return kept, int(drop.sum())


def _recomputed_score(lp_s: np.ndarray, lp_a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        score = 1.0 / (1.0 + np.exp(-(lp_s - lp_a)))
    return np.where(np.isneginf(lp_s) & np.isneginf(lp_a), 0.5, score)


def check_stereotype_scores(raw: pd.DataFrame, tolerance: float = SCORE_TOLERANCE) -> pd.DataFrame:
    """Rows (of the files as stored, before any fix) whose stereotype_score is not
    sigmoid(logprob_stereotype - logprob_anti_stereotype), with file, CSV line and both values."""
    recomputed = _recomputed_score(raw["logprob_stereotype"].to_numpy(), raw["logprob_anti_stereotype"].to_numpy())
    stored = pd.to_numeric(raw["stereotype_score"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isclose(stored, recomputed, rtol=0.0, atol=tolerance, equal_nan=True)
    out = raw.loc[bad, ["_file", "_row", "model", "prompt_id"]].rename(columns={"_file": "file", "_row": "line"})
    out["stored"] = stored[bad]
    out["recomputed"] = recomputed[bad]
    return out.reset_index(drop=True)


def noise_base_ids(prompt_id: pd.Series) -> pd.Series:
    return prompt_id.str.replace(r"_en$", "", regex=True)


def _text_columns(prompts_path: Path | None, mapping: dict | None) -> pd.DataFrame | None:
    """Context and continuation texts per prompt id from prompts.json (roles fixed like the scores)."""
    if prompts_path is None:
        return None
    try:
        prompts = json.loads(prompts_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ReleasedDataError(f"{prompts_path}: not a readable prompts.json: {err}") from err
    records = []
    for prompt in prompts:
        roles = {r: r for r in ROLE_COLUMNS}
        base = prompt.get("base_id")
        if mapping is not None and base in mapping:
            if mapping[base] is None:
                continue
            roles = mapping[base]
        records.append({
            "prompt_id": prompt.get("id"),
            "stereotyped": prompt.get(roles["stereotype"]),
            "anti_stereotyped": prompt.get(roles["anti_stereotype"]),
            "third": prompt.get(roles["unrelated"]),
        })
    return pd.DataFrame(records).drop_duplicates("prompt_id")


def as_scores(table: pd.DataFrame, *, language: pd.Series, variant: pd.Series, via: pd.Series,
               item_id: pd.Series, base: pd.Series) -> pd.DataFrame:
    mapped = table["category"].map(source_dimension_category)
    out = pd.DataFrame({
        "model": table["model"].astype(str).to_numpy(),
        "item_id": item_id.to_numpy(),
        "base_id": base.to_numpy(),
        "source": [m[0] for m in mapped],
        "dimension": [m[1] for m in mapped],
        "category": [m[2] for m in mapped],
        "language": language.to_numpy(),
        "variant": variant.to_numpy(),
        "via": via.to_numpy(),
        "context": table["context"].to_numpy() if "context" in table else None,
        "stereotyped": None,
        "anti_stereotyped": None,
        "third": None,
    })
    out["third_kind"] = np.where(out["source"] == "bbq", "unknown", "unrelated")
    for role, option in SCORE_OPTIONS.items():
        lp = table[ROLE_COLUMNS[role]].to_numpy(dtype=float)
        out[f"lp_sum_{option}"] = np.nan
        out[f"ntok_{option}"] = np.nan
        out[f"lp_mean_{option}"] = lp
    out["prompt_id"] = table["prompt_id"].to_numpy()
    return out


def load_released(
    path_or_dir: str | Path,
    *,
    fix_labels: bool = True,
    layer_b: bool = False,
    models: Iterable[str] | None = None,
    drop_collapsed: bool = True,
    label_fix: str | Path | None = None,
) -> Released:
    """Read the released files under a folder (or one item file and its neighbours) into a
    `Released`: the scores table plus collapsed versions, flagged rows and a summary of counts.
    See the module docstring for the mapping; `read_released` returns only the scores."""
    path = project_path(path_or_dir)
    if not path.exists():
        raise ReleasedDataError(f"{path}: no such file or folder of released scores")
    chosen = None if models is None else list(models)
    item_files, noise_files, fix_path, prompts_path = find_release_files(path, chosen)
    if label_fix is not None:
        fix_path = project_path(label_fix)
    if not item_files and not noise_files:
        raise ReleasedDataError(
            f"{path}: no released score files there (expected <model>_checkpoint.csv and "
            f"noise_floor/<model>_noise_floor.csv{'' if chosen is None else f' for models {chosen}'})"
        )
    mapping = None
    if fix_labels:
        if fix_path is None or not fix_path.exists():
            raise ReleasedDataError(
                f"{path}: fix_labels=True needs label_fix.json beside the score files; download "
                f"{released_file('label_fix.json', 'MultilingualBiasAudit/data/label_fix.json', LABEL_FIX_COMMIT).url} "
                "into that folder, or pass fix_labels=False to read the raw (mislabelled) scores"
            )
        mapping = read_label_fix(fix_path)

    summary: dict[str, Any] = {"item_files": [p.name for p in item_files], "noise_files": [p.name for p in noise_files],
                               "label_fix": None if fix_path is None or not fix_labels else str(fix_path),
                               "texts": prompts_path is not None}
    frames, mismatch_frames = [], []

    # ---- layer A and B item files ------------------------------------------------------------
    items_raw = pd.concat([read_release_csv(p, ITEM_FILE_COLUMNS) for p in item_files], ignore_index=True) \
        if item_files else pd.DataFrame(columns=[*ITEM_FILE_COLUMNS, "_file", "_row"])
    if chosen is not None:
        items_raw = items_raw.loc[items_raw["model"].isin(chosen)]
    mismatch_frames.append(check_stereotype_scores(items_raw))
    summary["rows_read"] = int(len(items_raw))
    summary["layer_b_rows"] = int((items_raw["layer"] == "B").sum())
    if not layer_b:
        items_raw = items_raw.loc[items_raw["layer"] != "B"]
    dropped_rows = 0
    if mapping is not None:
        items_raw, dropped_rows = apply_label_fix(items_raw, mapping, items_raw["base_prompt_id"])
    summary["rows_dropped_by_label_fix"] = dropped_rows
    try:
        language = items_raw["language"].map(iso_language)
    except ValueError as err:
        raise ReleasedDataError(f"{item_files}: {err}") from err
    english = (language == "en") & (items_raw["layer"] != "B")
    variant = pd.Series(np.where(english, "original", "translation"), index=items_raw.index)
    via = pd.Series(np.where(english, "human", np.where(items_raw["layer"] == "B", "native", "released")),
                    index=items_raw.index)
    item_id = items_raw["base_prompt_id"] + "/" + language
    frames.append(as_scores(items_raw, language=language, variant=variant, via=via, item_id=item_id,
                             base=items_raw["base_prompt_id"]))

    # ---- noise-floor files: English rewordings by round trip -----------------------------------
    english_mismatches = pd.DataFrame(columns=["model", "base_id", "file", "line"])
    if noise_files:
        noise_raw = pd.concat([read_release_csv(p, NOISE_FILE_COLUMNS) for p in noise_files], ignore_index=True)
        if chosen is not None:
            noise_raw = noise_raw.loc[noise_raw["model"].isin(chosen)]
        mismatch_frames.append(check_stereotype_scores(noise_raw))
        base = noise_base_ids(noise_raw["prompt_id"])
        if mapping is not None:
            noise_raw, _ = apply_label_fix(noise_raw, mapping, base)
            base = noise_base_ids(noise_raw["prompt_id"])
        is_original = noise_raw["pivot"].astype(str).eq("none")
        # The originals repeat the item files' English rows: check, then keep one copy.
        originals = noise_raw.loc[is_original]
        known = frames[0].loc[frames[0]["variant"] == "original"].set_index(["model", "base_id"])
        key = pd.MultiIndex.from_arrays([originals["model"], base.loc[originals.index]])
        present = key.isin(known.index)
        if present.any():
            mine = originals.loc[present, list(ROLE_COLUMNS.values())].to_numpy(dtype=float)
            theirs = known.loc[key[present], ["lp_mean_stereotyped", "lp_mean_anti_stereotyped",
                                              "lp_mean_third"]].to_numpy(dtype=float)
            differ = ~np.isclose(mine, theirs, rtol=0.0, atol=1e-9).all(axis=1)
            rows = originals.loc[present].loc[differ]
            english_mismatches = pd.DataFrame({"model": rows["model"].to_numpy(),
                                               "base_id": base.loc[rows.index].to_numpy(),
                                               "file": rows["_file"].to_numpy(), "line": rows["_row"].to_numpy()})
        summary["english_rows_only_in_noise_files"] = int((~present).sum())
        if (~present).any():
            # A model with a noise file but no item file: its originals come from the noise file.
            extra = originals.loc[~present]
            extra = extra.assign(category=category_lookup(extra, base, items_raw), context=None)
            frames.append(as_scores(extra, language=pd.Series("en", index=extra.index),
                                     variant=pd.Series("original", index=extra.index),
                                     via=pd.Series("human", index=extra.index),
                                     item_id=base.loc[extra.index] + "/en", base=base.loc[extra.index]))
        reworded = noise_raw.loc[~is_original]
        reworded = reworded.assign(category=category_lookup(reworded, base, items_raw), context=None)
        pivot = reworded["pivot"].astype(str)
        seed = pd.to_numeric(reworded["seed"], errors="coerce").fillna(-1).astype(int).astype(str)
        rb = base.loc[reworded.index]
        frames.append(as_scores(reworded, language=pd.Series("en", index=reworded.index),
                                 variant=pd.Series("rewording", index=reworded.index), via=pivot,
                                 item_id=rb + "/en~" + pivot + "-s" + seed, base=rb))

    # ---- within-language rewordings (Hindi and Spanish translations reworded in the same language) ----
    within_files = _within_language_files(path, chosen)
    summary["within_language_files"] = [p.name for p in within_files]
    if within_files:
        within_raw = pd.concat([read_release_csv(p, WITHIN_FILE_COLUMNS) for p in within_files], ignore_index=True)
        within_raw = within_raw.loc[within_raw["condition"].astype(str).eq("rw_target")]
        if chosen is not None:
            within_raw = within_raw.loc[within_raw["model"].isin(chosen)]
        mismatch_frames.append(check_stereotype_scores(within_raw))
        if mapping is not None:
            within_raw, _ = apply_label_fix(within_raw, mapping, within_raw["base_prompt_id"])
        try:
            language = within_raw["language"].map(iso_language)
        except ValueError as err:
            raise ReleasedDataError(f"{within_files}: {err}") from err
        wb = within_raw["base_prompt_id"]
        within_raw = within_raw.assign(category=category_lookup(within_raw, wb, items_raw), context=None)
        frames.append(as_scores(within_raw, language=language,
                                 variant=pd.Series("rewording", index=within_raw.index),
                                 via=pd.Series(WITHIN_REWRITER, index=within_raw.index),
                                 item_id=wb + "/" + language + "~" + WITHIN_REWRITER, base=wb))

    scores = pd.concat(frames, ignore_index=True)
    texts = _text_columns(prompts_path, mapping)
    if texts is not None:
        filled = scores[["prompt_id"]].merge(texts, on="prompt_id", how="left")
        # a rewording is named by the prompt id of the version it rewords: its own texts are not in prompts.json
        reworded = scores["variant"].eq("rewording").to_numpy()
        for column in ("stereotyped", "anti_stereotyped", "third"):
            scores[column] = np.where(reworded, None, filled[column].to_numpy())

    # ---- checks and the collapsed contrasts ----------------------------------------------------
    duplicated = scores.duplicated(["model", "item_id"], keep=False)
    if duplicated.any():
        first = scores.loc[duplicated, ["model", "item_id"]].head(5).to_dict("records")
        raise ReleasedDataError(f"{path}: {int(duplicated.sum())} rows share a model and item id, e.g. {first}; "
                                "are the same model's files in the folder twice?")
    collapsed_mask = (scores["variant"] != "original") & (
        scores["lp_mean_stereotyped"].to_numpy() == scores["lp_mean_anti_stereotyped"].to_numpy())
    if not drop_collapsed:
        collapsed_mask[:] = False
    collapsed = scores.loc[collapsed_mask].drop(columns="prompt_id").reset_index(drop=True)
    scores = scores.loc[~collapsed_mask].drop(columns="prompt_id").reset_index(drop=True)
    mismatches = pd.concat(mismatch_frames, ignore_index=True)
    if len(mismatches):
        shown = mismatches.head(5).to_dict("records")
        warnings.warn(f"{len(mismatches)} released row(s) store a stereotype_score that is not "
                      f"sigmoid(logprob_stereotype - logprob_anti_stereotype), e.g. {shown}",
                      ReleasedDataWarning, stacklevel=2)
    if len(english_mismatches):
        warnings.warn(f"{len(english_mismatches)} English original(s) in the noise-floor files differ from the "
                      f"item files' English rows (the item files' are kept), e.g. "
                      f"{english_mismatches.head(3).to_dict('records')}", ReleasedDataWarning, stacklevel=2)
    summary.update({
        "models": sorted(scores["model"].unique().tolist()),
        "english_bases": int(scores.loc[scores["variant"] == "original", "base_id"].nunique()),
        "rows": int(len(scores)),
        "collapsed": int(len(collapsed)),
        "collapsed_by_language": collapsed.groupby(["variant", "language", "via"]).size().rename("n")
        .reset_index().to_dict("records"),
        "score_mismatches": int(len(mismatches)),
        "english_mismatches": int(len(english_mismatches)),
    })
    return Released(scores=scores, collapsed=collapsed, score_mismatches=mismatches,
                    english_mismatches=english_mismatches, summary=summary)


def category_lookup(rows: pd.DataFrame, base: pd.Series, items_raw: pd.DataFrame) -> np.ndarray:
    """The category of noise-floor rows (the noise files carry none), taken from the item files
    by base id, else guessed from the id's prefix (ss_ StereoSet, bbq_<Category>_)."""
    known = items_raw.drop_duplicates("base_prompt_id").set_index("base_prompt_id")["category"]
    ids = base.loc[rows.index]
    looked_up = ids.map(known)

    def guess(b: str) -> str:
        if b.startswith("bbq_"):
            return "bbq_" + b[len("bbq_"):].rsplit("_", 1)[0]
        if b.startswith("ss_"):
            return "stereoset_unknown"
        return b.rsplit("_", 1)[0]

    return np.where(looked_up.isna(), ids.map(guess), looked_up).astype(object)


def read_released(
    path_or_dir: str | Path,
    *,
    fix_labels: bool = True,
    layer_b: bool = False,
    models: Iterable[str] | None = None,
) -> pd.DataFrame:
    """The paper's released scores as this project's scores table (module docstring: the mapping).

    `path_or_dir` is a folder holding `<model>_checkpoint.csv`, `<model>_noise_floor.csv` (or
    `noise_floor/...`) and `label_fix.json`, or one item file with its neighbours. With
    `fix_labels=True` the two label errors are fixed (362 English bases); collapsed contrasts are
    dropped; layer-B probes only with `layer_b=True`. Log-probs are per-token means: use
    `aggregate="mean"` on this table.
    """
    return load_released(path_or_dir, fix_labels=fix_labels, layer_b=layer_b, models=models).scores


def main(argv: list[str] | None = None) -> None:
    """`python -m biasaudit.data.released`: download the released scores into the cache (what `make released` runs)."""
    parser = argparse.ArgumentParser(description="Download the paper's released item scores (pinned, sha256-checked).")
    parser.add_argument("--models", nargs="*", help=f"models to fetch (default: all ten: {', '.join(RELEASED_MODELS)})")
    parser.add_argument("--folder", help="where to put them (default: the cache, $BIASAUDIT_CACHE_DIR/released/...)")
    args = parser.parse_args(argv)
    try:
        folder = fetch_released(args.models or None, folder=args.folder)
    except (ReleasedDataError, ValueError) as err:
        raise SystemExit(f"error: {err}") from None
    print(f"{folder}: released scores of {', '.join(released_models_in(folder))}")


if __name__ == "__main__":
    main()
