"""The noise floor (chapter 11) and each model's language gap against its floor (chapter 12).

Rewording English keeps an item's meaning and changes only its wording, which a translation
also does: how far rewording alone moves the scores is the yardstick for every language drop.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pandas as pd

from biasaudit.analyses import stats
from biasaudit.analyses.carry_over import carry_point
from biasaudit.analyses.drops import cell_tests, cells_from_pairs
from biasaudit.analyses.scores import (
    column_sums_by_cluster,
    english_rewording_pairs,
    item_scores,
    paired_with_english,
)
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions
from biasaudit.data.item_table import normalise

TEXT_FIELDS: tuple[str, ...] = ("context", "stereotyped", "anti_stereotyped", "third")


def floor_cells(scores: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """One row per model × rewording route (`via`): the `cell_tests` columns for English
    rewordings against their originals, plus `floor` = |drop| and `floor_binary` = |drop_binary|.

    The family for Benjamini–Hochberg is every model × route cell. Rewording English changes
    nothing a translation would, so a reliable cell here would be a false alarm of the method.
    """
    cells = cell_tests(scores, options, variant="rewording", group="via", languages=["en"])
    cells.insert(3, "floor", cells["drop"].abs())
    cells["floor_binary"] = cells["drop_binary"].abs()
    return cells


def model_floors(cells: pd.DataFrame) -> pd.Series:
    """Each model's noise floor: the mean over its rewording routes of |English − reworded| (a
    `floor_cells` table in). The one definition every chapter uses.

    The mean, not the median: a route's |drop| is one draw of how far a rewording moves the scores,
    a non-negative and right-skewed quantity, so the median of a few routes understates the expected
    displacement (with three routes it keeps only the middle one). It is also the paper's floor."""
    return cells.groupby("model")["floor"].mean()


def unchanged_fields(scores: pd.DataFrame) -> pd.DataFrame:
    """Per English rewording: the share of its four text fields (context and the three options)
    that came back identical to the original's (after NFKC and casefolding).

    Columns item_id, via, share_unchanged; empty when the table carries no texts (released scores).
    """
    versions = scores.drop_duplicates("item_id")
    if not all(c in versions for c in TEXT_FIELDS) or versions[list(TEXT_FIELDS)].isna().all().all():
        return pd.DataFrame(columns=["item_id", "via", "share_unchanged"])
    originals = versions.loc[versions["variant"] == "original"].set_index("base_id")
    reworded = versions.loc[(versions["variant"] == "rewording") & (versions["language"] == "en")]
    reworded = reworded.loc[reworded["base_id"].isin(originals.index)]

    def same(a: object, b: object) -> float:
        if not isinstance(a, str) or not isinstance(b, str):
            return np.nan
        return float(normalise(a) == normalise(b))

    shares = []
    for row in reworded.itertuples(index=False):
        original = originals.loc[row.base_id]
        flags = [same(getattr(row, f), original[f]) for f in TEXT_FIELDS]
        shares.append(np.nanmean(flags) if not all(np.isnan(flags)) else np.nan)
    return pd.DataFrame({"item_id": reworded["item_id"].to_numpy(), "via": reworded["via"].to_numpy(),
                         "share_unchanged": shares})


def noise_floor(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    similarity: pd.DataFrame | None = None,
    cells: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per rewording route (`via`): how far rewording English alone moves the scores.

    Columns: via, n_models, n_items, share_unchanged (text fields returned identical; NaN without
    texts), similarity (mean of `similarity`'s column of that name by item_id, when given, e.g.
    embedding similarity from the judging chapter; else NaN), floor (median over models of
    |English mean − reworded mean| on the paired items), floor_mean (its mean over models),
    noise_only (median over models of s·sqrt(2/π)/sqrt(n)), slope and r (carry-over of the soft
    score, every pair pooled as the paper does: `carry_over.carry_point`), same_choice (share of model × item pairs whose binary choice is
    unchanged), n_cells and reliable_cells (cells with BH q < alpha, family = all model × route
    cells: the rewordings that would be called real shifts).

    A last row, via = "all routes", summarises the run: its floor is the median over models of
    each model's floor (`model_floors`: the mean over its routes), as docs/design.md, "Definitions",
    defines it.
    """
    scored = item_scores(scores, options.aggregate)
    pairs = english_rewording_pairs(scored)
    if cells is None:
        cells = floor_cells(scores, options)
    unchanged = unchanged_fields(scores).groupby("via")["share_unchanged"].mean()
    similar = None
    if similarity is not None:
        if not {"item_id", "similarity"} <= set(similarity.columns):
            raise KeyError("noise_floor: `similarity` needs columns item_id and similarity")
        versions = scores.drop_duplicates("item_id")[["item_id", "via"]]
        similar = versions.merge(similarity[["item_id", "similarity"]], on="item_id").groupby("via")["similarity"].mean()
    rows = []
    for via, group in pairs.groupby("via", sort=True):
        per_model = cells.loc[cells["via"] == via]
        fit = carry_point(group)
        rows.append({
            "via": via, "n_models": group["model"].nunique(), "n_items": group["base_id"].nunique(),
            "share_unchanged": float(unchanged.get(via, np.nan)),
            "similarity": float(similar.get(via, np.nan)) if similar is not None else np.nan,
            "floor": float(per_model["floor"].median()), "floor_mean": float(per_model["floor"].mean()),
            "noise_only": float(per_model["noise_only"].median()),
            "slope": fit["slope"], "r": fit["r"],
            "same_choice": float((group["binary"] == group["binary_en"]).mean()),
            "n_cells": len(per_model), "reliable_cells": int(per_model["reliable"].sum()),
        })
    if rows:
        per_model_floor = model_floors(cells)
        fit = carry_point(pairs)
        rows.append({
            "via": "all routes", "n_models": pairs["model"].nunique(), "n_items": pairs["base_id"].nunique(),
            "share_unchanged": float(unchanged.mean()) if len(unchanged) else np.nan,
            "similarity": float(similar.mean()) if similar is not None else np.nan,
            "floor": float(per_model_floor.median()), "floor_mean": float(per_model_floor.mean()),
            "noise_only": float(cells["noise_only"].median()),
            "slope": fit["slope"], "r": fit["r"],
            "same_choice": float((pairs["binary"] == pairs["binary_en"]).mean()),
            "n_cells": len(cells), "reliable_cells": int(cells["reliable"].sum()),
        })
    columns = ["via", "n_models", "n_items", "share_unchanged", "similarity", "floor", "floor_mean", "noise_only",
               "slope", "r", "same_choice", "n_cells", "reliable_cells"]
    return pd.DataFrame(rows, columns=columns)


def model_gaps(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    floor_over_routes: Literal["median", "mean"] = "mean",
    cells: pd.DataFrame | None = None,
    floors: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per model: how far its scores move across languages, against how far rewording moves them.

    Columns: model, n_items (English bases), english_soft, english_binary, n_languages, gap (CSS:
    mean over languages of |mean_L − mean_en| on paired items), gap_binary (the same on binary
    scores), floor (|English − reworded English| per route, then the mean over routes as
    `model_floors` defines it, or the median with `floor_over_routes="median"`), gap_minus_floor
    with a percentile bootstrap interval (low, high) over base items (every version of an item is
    drawn with it, so the languages and routes stay paired), above_floor (low > 0), reliable_drops
    and reliable_drops_binary (languages whose drop is positive and reliable, BH over all model ×
    language cells), reliable_shifts (reliable cells of either sign) and clci = 1 − gap.

    These are consistency measures of a model's scores across languages, not a ranking of
    models for deployment.
    """
    if floor_over_routes not in ("median", "mean"):
        raise ValueError(f"floor_over_routes must be 'median' or 'mean', not {floor_over_routes!r}")
    scored = item_scores(scores, options.aggregate)
    translation = paired_with_english(scored, "translation")
    reworded = english_rewording_pairs(scored)
    if cells is None:
        cells = cells_from_pairs(translation, "language", options)
    if floors is None:
        floors = cells_from_pairs(reworded, "via", options)
    summarise = np.nanmedian if floor_over_routes == "median" else np.nanmean
    rows = []
    for model, english in scored.loc[scored["variant"] == "original"].groupby("model", sort=True):
        model_cells = cells.loc[cells["model"] == model]
        route_floors = floors.loc[floors["model"] == model]
        languages = sorted(model_cells["language"])
        routes = sorted(route_floors["via"])
        clusters = pd.Index(np.sort(english["base_id"].unique()))
        sums = np.column_stack([
            column_sums_by_cluster(translation.loc[translation["model"] == model], "language", "change",
                                    clusters, languages),
            column_sums_by_cluster(reworded.loc[reworded["model"] == model], "via", "change", clusters, routes),
        ])
        k, v = len(languages), len(routes)

        def statistic(totals: np.ndarray, k: int = k, v: int = v) -> np.ndarray:
            lang_sums, route_sums = totals[:, :k], totals[:, 2 * k:2 * k + v]
            lang_n, route_n = totals[:, k:2 * k], totals[:, 2 * k + v:]
            with np.errstate(invalid="ignore", divide="ignore"):
                gap = np.abs(lang_sums / lang_n)
                floor = np.abs(route_sums / route_n)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows give NaN, as intended
                gap_mean = np.nanmean(gap, axis=1) if k else np.full(len(totals), np.nan)
                floor_summary = summarise(floor, axis=1) if v else np.full(len(totals), np.nan)
            return np.column_stack([gap_mean, floor_summary, gap_mean - floor_summary])

        rng_seed = [options.seed, stats.group_seed_key(("model_gaps", model))]
        estimate, low, high = stats.bootstrap_sums(sums, statistic, n_boot=options.n_bootstrap, seed=rng_seed,
                                                   level=options.level)
        gap = float(model_cells["drop"].abs().mean()) if k else np.nan
        rows.append({
            "model": model, "n_items": len(clusters),
            "english_soft": float(english["soft"].mean()), "english_binary": float(english["binary"].mean()),
            "n_languages": k, "gap": gap,
            "gap_binary": float(model_cells["drop_binary"].abs().mean()) if k else np.nan,
            "floor": float(estimate[1]), "gap_minus_floor": float(estimate[2]),
            "low": float(low[2]), "high": float(high[2]), "above_floor": bool(low[2] > 0),
            "reliable_drops": int((model_cells["reliable"] & (model_cells["drop"] > 0)).sum()),
            "reliable_drops_binary": int((model_cells["reliable_binary"] & (model_cells["drop_binary"] > 0)).sum()),
            "reliable_shifts": int(model_cells["reliable"].sum()),
            "clci": 1.0 - gap,
        })
    return pd.DataFrame(rows)


def model_drop_table(cells: pd.DataFrame, *, decimals: int = 3, mark: str = "†") -> pd.DataFrame:
    """The model × language drop table for reading: drops as text, `mark` on reliable cells, and a
    last column "noise only" (the mean over the model's languages of s·sqrt(2/π)/sqrt(n), the
    |drop| pure scatter would produce on average). Rows are models, columns languages."""
    text = cells.assign(
        shown=[f"{d:.{decimals}f}{mark if r else ''}" for d, r in zip(cells["drop"], cells["reliable"])]
    )
    table = text.pivot(index="model", columns="language", values="shown")
    table["noise only"] = cells.groupby("model")["noise_only"].mean().map(lambda v: f"{v:.{decimals}f}")
    table.columns.name = None
    return table




def separate_rewordings(scores: pd.DataFrame, rewordings: pd.DataFrame,
                        options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """English rewordings kept apart from the floor's routes (the release's LLM rewordings) beside the floor's
    routes on the same base items (the paper's Table 3, its second block, "92-item subset"). Per route and for
    the separate rewordings (their own `via`): n_items, floor (median over models of |English mean − reworded
    mean|, as a route's floor), median_abs_d and sd_d (the median over models of each model's median |change|
    and of the SD of its changes), as the paper summarises them; sd_pooled (the SD of the changes over every
    model × item pair) and noise_only_pooled = sd_pooled·sqrt(2/(π·n_items)), the |mean| that pure scatter of
    that size gives on average (the paper's "expected" floor of its LLM rewordings). Empty where there are none."""
    columns = ["via", "n_items", "floor", "median_abs_d", "sd_d", "sd_pooled", "noise_only_pooled"]
    if rewordings.empty:
        return pd.DataFrame(columns=columns)
    covered = scores["base_id"].isin(set(rewordings["base_id"])) & (scores["language"] == "en")
    pairs = english_rewording_pairs(item_scores(pd.concat([scores.loc[covered], rewordings], ignore_index=True),
                                                options.aggregate)).dropna(subset=["change"])
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    per_model = pairs.groupby(["via", "model"])["change"].agg(
        floor=lambda c: abs(c.mean()), median_abs_d=lambda c: c.abs().median(), sd_d=lambda c: c.std(ddof=1))
    out = per_model.groupby(level="via").median()
    out.insert(0, "n_items", pairs.groupby("via")["base_id"].nunique())
    out["sd_pooled"] = pairs.groupby("via")["change"].std(ddof=1)
    out["noise_only_pooled"] = out["sd_pooled"] * np.sqrt(2 / (np.pi * out["n_items"]))
    separate = list(rewordings["via"].unique())
    order = [v for v in out.index if v not in separate] + [v for v in separate if v in out.index]
    return out.loc[order].reset_index()[columns]
