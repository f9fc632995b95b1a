"""One item followed through every version and model (chapter 21)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasaudit.analyses.scores import item_scores
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions


def pick_case(scores: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS) -> str:
    """The base item whose English original leans most strongly to the stereotype in *every* model
    (the largest minimum over models of soft − 0.5), among items with translations; if no item
    leans stereotyped in every model, the one with the largest minimum strength |soft − 0.5|."""
    scored = item_scores(scores, options.aggregate)
    translated = set(scored.loc[scored["variant"] == "translation", "base_id"])
    english = scored.loc[(scored["variant"] == "original") & scored["base_id"].isin(translated or set(scored["base_id"]))]
    if english.empty:
        raise ValueError("the scores table has no English originals to choose a case from")
    lean = english.groupby("base_id")["soft"].min() - 0.5
    if (lean > 0).any():
        return str(lean.sort_index().idxmax())
    return str(english.groupby("base_id")["strength"].min().sort_index().idxmax())


def case_study(scores: pd.DataFrame, base_id: str = "", options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """One base item in every version the table has, across models.

    `base_id` empty: `pick_case`. One row per model × version: model, item_id, language, variant,
    via, soft, binary, choice ("stereotyped", "anti-stereotyped" or "tie": the continuation the
    model prefers), drop (the model's English soft − soft: positive when the version scores lower, the
    book's sign for every drop) and the version's texts (context,
    stereotyped, anti_stereotyped; missing in released scores). Versions are ordered English
    original first, then translations, then rewordings, each by language and route.
    """
    base_id = base_id or pick_case(scores, options)
    mine = scores.loc[scores["base_id"] == base_id]
    if mine.empty:
        known = sorted(scores["base_id"].unique())[:5]
        raise KeyError(f"no item with base_id {base_id!r} in the scores table (e.g. {known})")
    scored = item_scores(mine, options.aggregate)
    english = scored.loc[scored["variant"] == "original"].set_index("model")["soft"]
    texts = mine.drop_duplicates("item_id").set_index("item_id")
    out = scored[["model", "item_id", "base_id", "source", "dimension", "language", "variant", "via", "soft",
                  "binary"]].copy()
    out["choice"] = np.where(scored["tie"], "tie", out["binary"].map({1.0: "stereotyped", 0.0: "anti-stereotyped"}))
    out["drop"] = out["model"].map(english) - out["soft"]
    for column in ("context", "stereotyped", "anti_stereotyped"):
        out[column] = out["item_id"].map(texts[column]) if column in texts else None
    order = {"original": 0, "translation": 1, "rewording": 2}
    out = out.assign(_order=out["variant"].map(order)).sort_values(["_order", "language", "via", "model"])
    return out.drop(columns="_order").reset_index(drop=True)

