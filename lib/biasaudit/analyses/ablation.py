"""The three pipeline errors, alone and together (chapter 20). `label_errors` is a table function
like the others; `biasaudit.run.pipeline.rerun_with_errors` runs the real pipeline (loaders and
scorer) with the errors switched on to build its input."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from biasaudit.analyses.carry_over import carry_point
from biasaudit.analyses.drops import cells_from_pairs, empty_cells
from biasaudit.analyses.scores import (
    english_rewording_pairs,
    item_scores,
    paired_with_english,
)
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions

ERROR_FLAGS: tuple[str, ...] = ("stereoset_label_map", "bbq_roles_by_order", "scorer_boundary")


def error_settings() -> list[dict[str, bool]]:
    """The eight combinations of the three pipeline errors: none, each alone, each pair, all three."""
    settings = []
    for size in range(len(ERROR_FLAGS) + 1):
        for chosen in combinations(ERROR_FLAGS, size):
            settings.append({flag: flag in chosen for flag in ERROR_FLAGS})
    return settings


def setting_name(setting: dict[str, bool] | pd.Series) -> str:
    """A readable name of a combination of errors: "none", or the switched-on errors joined by " + "."""
    on = [flag for flag in ERROR_FLAGS if bool(setting.get(flag, False))]
    return " + ".join(on) if on else "none"


def label_errors(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    by: str | None = None,
) -> pd.DataFrame:
    """The main results under each combination of the three pipeline errors (docs/design.md, "Pipeline errors").

    `scores` holds one scores table per setting, stacked, with boolean columns
    stereoset_label_map, bbq_roles_by_order and scorer_boundary naming the errors switched on (a
    missing column means off). One row per setting (with `by`, e.g. "source", per setting and
    value of that column). Columns: the three flags, setting (readable name), n_models, n_items
    (English bases), english_soft, english_binary, n_cells (model × language cells of
    translations), cells_below (cells whose language scores below English: drop > 0),
    reliable_drops (of those, BH q < alpha, the family being the setting's cells), slope_rewording
    and slope_translation (carry-over, every pair pooled: the paper's), and empty_options (model × version
    rows where the stereotyped or anti-stereotyped continuation had no token scored: only the
    boundary error produces these; NaN without token counts).
    """
    table = scores.copy()
    for flag in ERROR_FLAGS:
        table[flag] = table[flag].fillna(False).astype(bool) if flag in table else False
    keys = [*ERROR_FLAGS, *([by] if by else [])]
    rows = []
    for key, chunk in table.groupby(keys, sort=False):
        chunk = chunk.drop(columns=list(ERROR_FLAGS)).reset_index(drop=True)
        scored = item_scores(chunk, options.aggregate)
        english = scored.loc[scored["variant"] == "original"]
        translation = paired_with_english(scored, "translation")
        cells = (cells_from_pairs(translation, "language", options)
                 if len(translation) else empty_cells())
        row = dict(zip(keys, key))
        row["setting"] = setting_name(row)
        if {"ntok_stereotyped", "ntok_anti_stereotyped"} <= set(chunk.columns) and chunk["ntok_stereotyped"].notna().all():
            empty = int(((chunk["ntok_stereotyped"] == 0) | (chunk["ntok_anti_stereotyped"] == 0)).sum())
        else:
            empty = np.nan
        row.update({
            "n_models": english["model"].nunique(), "n_items": english["base_id"].nunique(),
            "english_soft": float(english["soft"].mean()) if len(english) else np.nan,
            "english_binary": float(english["binary"].mean()) if len(english) else np.nan,
            "n_cells": len(cells), "cells_below": int((cells["drop"] > 0).sum()),
            "reliable_drops": int((cells["reliable"].astype(bool) & (cells["drop"] > 0)).sum()),
            "slope_rewording": carry_point(english_rewording_pairs(scored))["slope"],
            "slope_translation": carry_point(translation)["slope"],
            "empty_options": empty,
        })
        rows.append(row)
    columns = [*keys, "setting", "n_models", "n_items", "english_soft", "english_binary", "n_cells", "cells_below",
               "reliable_drops", "slope_rewording", "slope_translation", "empty_options"]
    return pd.DataFrame(rows, columns=columns)


_OPTION_OF_ROLE: dict[str, str] = {"stereotype": "stereotyped", "anti_stereotype": "anti_stereotyped",
                                   "unrelated": "third"}


def released_label_settings(raw: pd.DataFrame, label_fix: dict[str, dict[str, str] | None], *,
                            same_items: bool = True) -> pd.DataFrame:
    """The paper's raw released scores under the four combinations of label errors 1 and 2.

    `raw` is `biasaudit.data.released.read_released(..., fix_labels=False)` (its StereoSet items still carry
    error 1, its BBQ items error 2) and `label_fix` the release's label_fix.json map
    (`biasaudit.data.released.read_label_fix`: base id → for each role, the role whose stored column really
    holds it, or None when the roles cannot be recovered). A setting with an error switched off applies the fix to that
    source's items. Base items whose roles cannot be recovered are left out of every setting with
    `same_items` (all four compare the same items); without it, as the paper ran its pipelines, only a
    setting that applies the fix to their source leaves them out: a pipeline with error 2 cannot know
    which BBQ items are unrecoverable and scores them all, as stored. Returns the four tables
    stacked, with the flag columns `label_errors` reads (scorer_boundary False: the release has no
    scores from the other scorer).
    """
    dropped = {base for base, roles in label_fix.items() if roles is None}
    table = raw.loc[~raw["base_id"].isin(dropped)].reset_index(drop=True) if same_items else raw.reset_index(drop=True)
    lp = {option: table[f"lp_mean_{option}"].to_numpy(copy=True) for option in _OPTION_OF_ROLE.values()}
    fixed = {option: values.copy() for option, values in lp.items()}
    for position, base in enumerate(table["base_id"]):
        roles = label_fix.get(base)
        if roles:
            for role, stored in roles.items():
                fixed[_OPTION_OF_ROLE[role]][position] = lp[_OPTION_OF_ROLE[stored]][position]
    frames = []
    for label_map in (False, True):
        for roles_by_order in (False, True):
            version = table.copy()
            keep_raw = ((version["source"] == "stereoset") & label_map) | ((version["source"] == "bbq") & roles_by_order)
            for option in _OPTION_OF_ROLE.values():
                version[f"lp_mean_{option}"] = np.where(keep_raw, lp[option], fixed[option])
            if not same_items:  # the fixed pipeline of a source drops that source's unrecoverable items
                version = version.loc[keep_raw | ~version["base_id"].isin(dropped)]
            frames.append(version.assign(stereoset_label_map=label_map, bbq_roles_by_order=roles_by_order,
                                         scorer_boundary=False))
    return pd.concat(frames, ignore_index=True)


def error_example(
    scores: pd.DataFrame,
    flag: str,
    *,
    source: str | None = None,
    item_id: str = "",
    options: StudyOptions = DEFAULT_OPTIONS,
) -> pd.DataFrame:
    """One English item with no error and with the error `flag` alone, side by side.

    `scores` is stacked per setting as for `label_errors`. `item_id` empty: among the English
    originals (of `source`, when given) the one whose soft score, averaged over models, moves most
    under the error. One row per setting × model: setting, model, item_id, the texts by role
    (context, stereotyped, anti_stereotyped, third; missing in released scores), token counts of
    the two contrasting continuations (missing without them), soft and choice.
    """
    if flag not in ERROR_FLAGS:
        raise ValueError(f"flag must be one of {ERROR_FLAGS}, not {flag!r}")
    table = scores.copy()
    for name in ERROR_FLAGS:
        table[name] = table[name].fillna(False).astype(bool) if name in table else False
    others = [name for name in ERROR_FLAGS if name != flag]
    plain = table.loc[~table[list(ERROR_FLAGS)].any(axis=1)]
    broken = table.loc[table[flag] & ~table[others].any(axis=1)]
    keep = (plain["variant"] == "original") & (plain["source"] == source if source else True)
    plain = plain.loc[keep]
    columns = ["model", "item_id", "context", "stereotyped", "anti_stereotyped", "third", "ntok_stereotyped",
               "ntok_anti_stereotyped"]
    if plain.empty or broken.empty:
        return pd.DataFrame(columns=["setting", *columns, "soft", "choice"])
    frames = {}
    for name, part in (("none", plain), (flag, broken.loc[broken["item_id"].isin(plain["item_id"])])):
        scored = item_scores(part.reset_index(drop=True), options.aggregate)
        frame = part.reset_index(drop=True).reindex(columns=columns)
        frames[name] = frame.assign(setting=name, soft=scored["soft"].to_numpy(), binary=scored["binary"].to_numpy(),
                                    tie=scored["tie"].to_numpy())
    if not item_id:
        moved = frames["none"][["model", "item_id", "soft"]].merge(
            frames[flag][["model", "item_id", "soft"]], on=["model", "item_id"], suffixes=("", "_error"))
        moved["move"] = (moved["soft_error"] - moved["soft"]).abs()
        item_id = str(moved.groupby("item_id")["move"].mean().sort_index().idxmax())
    out = pd.concat([frames["none"], frames[flag]], ignore_index=True)
    out = out.loc[out["item_id"] == item_id]
    out["choice"] = np.where(out["tie"], "tie", out["binary"].map({1.0: "stereotyped", 0.0: "anti-stereotyped"}))
    return out[["setting", *columns, "soft", "choice"]].reset_index(drop=True)


