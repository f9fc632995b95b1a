"""Carry-over: how much of each item's own preference survives a rewording or a translation
(chapter 13). slope = r × SD ratio separates lost order (r) from squeezed spread (SD ratio)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasaudit.analyses import stats
from biasaudit.analyses.scores import item_scores, paired_with_english
from biasaudit.core.options import DEFAULT_OPTIONS, Aggregate, StudyOptions

CHANGES: tuple[str, ...] = ("rewording", "translation", "within-language rewording")


def carry_over_pairs(scores: pd.DataFrame, aggregate: Aggregate = "mean") -> pd.DataFrame:
    """Item-level before/after pairs of every kind of change, one row per model × changed version.

    change = "rewording" (English reworded; before = the English original, group = the route),
    "translation" (before = the English original, group = the language) or "within-language
    rewording" (a rewording of a translation, e.g. the bank's es and hi rewordings; before = that
    language's translation, group = the language; where a language has several translations of
    an item, the first by `via` is the reference). Columns: model, base_id, change, group,
    language, via, before, after (soft scores), binary_before, binary_after.
    """
    scored = item_scores(scores, aggregate)
    frames = []
    for change, variant, group in (("rewording", "rewording", "via"), ("translation", "translation", "language")):
        pairs = paired_with_english(scored, variant)
        if change == "rewording":
            pairs = pairs.loc[pairs["language"] == "en"]
        frames.append(pd.DataFrame({
            "model": pairs["model"], "base_id": pairs["base_id"], "change": change, "group": pairs[group],
            "language": pairs["language"], "via": pairs["via"], "before": pairs["soft_en"], "after": pairs["soft"],
            "binary_before": pairs["binary_en"], "binary_after": pairs["binary"],
        }))
    translations = (scored.loc[scored["variant"] == "translation"].sort_values("via")
                    .drop_duplicates(["model", "base_id", "language"]))
    within = scored.loc[(scored["variant"] == "rewording") & (scored["language"] != "en")]
    if len(within):
        pairs = within.merge(translations[["model", "base_id", "language", "soft", "binary"]],
                             on=["model", "base_id", "language"], suffixes=("", "_before"))
        frames.append(pd.DataFrame({
            "model": pairs["model"], "base_id": pairs["base_id"], "change": "within-language rewording",
            "group": pairs["language"], "language": pairs["language"], "via": pairs["via"],
            "before": pairs["soft_before"], "after": pairs["soft"],
            "binary_before": pairs["binary_before"], "binary_after": pairs["binary"],
        }))
    out = pd.concat(frames, ignore_index=True)
    return out.dropna(subset=["before", "after"]).reset_index(drop=True)


def translations_kept(pairs: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """The translation pairs of `carry_over_pairs` whose (base_id, language) is in `kept` (e.g. the versions
    whose contrast is preserved: `subsets.judged_versions`); the other kinds of change are left out."""
    translation = pairs.loc[pairs["change"] == "translation"]
    return translation.merge(kept[["base_id", "language"]].drop_duplicates(), on=["base_id", "language"])


def within_language_same_items(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per language with rewordings within it, three changes on the same items (those reworded there): the
    rewording within the language (before: the translation), the translation from English, and the English
    rewordings (every route pooled), so that their carry-over compares item for item (the paper's Table 15).

    `pairs`: `carry_over_pairs`. Columns: language, n_items, n_pairs, slope_within, r_within, same_choice_within,
    slope_translation, slope_rewording (the paper's fit: every model × item pair pooled)."""
    within = pairs.loc[pairs["change"] == "within-language rewording"]
    rows = []
    for language, chunk in within.groupby("group", sort=True):
        items = chunk["base_id"].unique()
        on_items = pairs.loc[pairs["base_id"].isin(items)]
        inside = carry_point(chunk)
        rows.append({"language": language, "n_items": len(items), "n_pairs": len(chunk),
                     "slope_within": inside["slope"], "r_within": inside["r"],
                     "same_choice_within": inside["same_choice"],
                     "slope_translation": carry_point(on_items.loc[(on_items["change"] == "translation")
                                                                   & (on_items["group"] == language)])["slope"],
                     "slope_rewording": carry_point(on_items.loc[on_items["change"] == "rewording"])["slope"]})
    return pd.DataFrame(rows, columns=["language", "n_items", "n_pairs", "slope_within", "r_within",
                                       "same_choice_within", "slope_translation", "slope_rewording"])


_CARRY_QUANTITIES = 7  # per model: n, x, y, xx, yy, xy, same choice
# What `_carry_statistic` returns, in order: the paper's carry-over (every model × item pair pooled as it is),
# same choice, and the same fit within models (each model's own mean taken out first).
CARRY_MEASURES: tuple[str, ...] = ("slope", "r", "sd_ratio", "same_choice", "slope_within", "r_within",
                                   "sd_ratio_within")


def _carry_sums(pairs: pd.DataFrame, clusters: pd.Index, models: list[str]) -> np.ndarray:
    """(clusters × 7·models) sums per base item, model by model, of before/after values centred on the
    chunk's own means (one centre for every model, so the sums pool across models as they are)."""
    codes_all = clusters.get_indexer(pairs["base_id"])
    center = (float(pairs["before"].mean()), float(pairs["after"].mean()))
    blocks = []
    for model in models:
        mask = (pairs["model"] == model).to_numpy()
        x = pairs["before"].to_numpy(dtype=float)[mask]
        y = pairs["after"].to_numpy(dtype=float)[mask]
        same = (pairs["binary_before"].to_numpy()[mask] == pairs["binary_after"].to_numpy()[mask]).astype(float)
        codes = codes_all[mask]
        block = stats.carry_over_sums(x, y, codes, len(clusters), center=center)
        blocks.append(np.column_stack([block, np.bincount(codes, weights=same, minlength=len(clusters))]))
    return np.column_stack(blocks)


def _carry_statistic(totals: np.ndarray) -> np.ndarray:
    """`CARRY_MEASURES` from per-model sums.

    The paper's carry-over pools every model × item pair as it is: the least-squares slope of after on
    before over all pairs (`np.polyfit` over the pooled pairs gives the same), r, and sd_ratio, with
    slope = r × sd_ratio. Within models: slope_within = Σ_m cov_m / Σ_m var_m(before), and r_within,
    sd_ratio_within likewise, so that differences between models' mean scores do not pass for
    carry-over. With one model the two agree, and both are `stats.carry_over`'s values.
    """
    t = totals.reshape(totals.shape[0], -1, _CARRY_QUANTITIES)
    n, sx, sy, sxx, syy, sxy, same = (t[:, :, k] for k in range(_CARRY_QUANTITIES))
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(n > 0, n, 1.0)
        vx = np.where(n > 0, sxx - sx * sx / safe, 0.0).sum(axis=1)
        vy = np.where(n > 0, syy - sy * sy / safe, 0.0).sum(axis=1)
        cov = np.where(n > 0, sxy - sx * sy / safe, 0.0).sum(axis=1)
        zero = np.zeros_like(vx)
        within = stats.carry_over_from_sums(np.column_stack([n.sum(axis=1), zero, zero, vx, vy, cov]))
        pooled = stats.carry_over_from_sums(np.column_stack([n.sum(axis=1), sx.sum(axis=1), sy.sum(axis=1),
                                                             sxx.sum(axis=1), syy.sum(axis=1), sxy.sum(axis=1)]))
        same_share = same.sum(axis=1) / n.sum(axis=1)
    return np.column_stack([pooled, same_share, within])


def carry_over_table(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    by_model: bool = False,
    pairs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """How much of each item's score survives a change, per kind of change and group, and pooled.

    One row per change (rewording, translation, within-language rewording) × group (route or
    language, and "all" pooling the change's groups); with `by_model` also per model. Columns:
    [model,] change, group, n_models, n_items, n_pairs, r, sd_ratio, slope (slope = r × sd_ratio; the
    paper's least squares over every model × item pair pooled as it is, see `_carry_statistic`), each
    with a percentile bootstrap interval over base items (`*_low`, `*_high`), same_choice (share of pairs
    with the same binary choice) with its interval, the same fit within models (slope_within, r_within,
    sd_ratio_within, with intervals), mean_before, mean_after, strength_before and
    strength_after (mean |soft − 0.5|: how strongly the items lean either way before and after).
    """
    if pairs is None:
        pairs = carry_over_pairs(scores, options.aggregate)
    keys: list[tuple] = []
    for change in CHANGES:
        groups = sorted(pairs.loc[pairs["change"] == change, "group"].unique())
        keys += [(change, g) for g in groups] + ([(change, "all")] if len(groups) > 1 else [])
    model_sets = [[m] for m in sorted(pairs["model"].unique())] if by_model else [sorted(pairs["model"].unique())]
    rows = []
    for models in model_sets:
        for change, group in keys:
            mask = (pairs["change"] == change) & pairs["model"].isin(models)
            if group != "all":
                mask &= pairs["group"] == group
            chunk = pairs.loc[mask]
            if chunk.empty:
                continue
            clusters = pd.Index(np.sort(chunk["base_id"].unique()))
            sums = _carry_sums(chunk, clusters, sorted(chunk["model"].unique()))
            key = ("carry_over", change, group, *(models if by_model else []))
            estimate, low, high = stats.bootstrap_sums(sums, _carry_statistic, n_boot=options.n_bootstrap,
                                                       seed=[options.seed, stats.group_seed_key(key)],
                                                       level=options.level)
            row = {"model": models[0]} if by_model else {}
            row.update({"change": change, "group": group, "n_models": chunk["model"].nunique(),
                        "n_items": len(clusters), "n_pairs": len(chunk)})
            for j, name in enumerate(CARRY_MEASURES):
                row[name], row[f"{name}_low"], row[f"{name}_high"] = float(estimate[j]), float(low[j]), float(high[j])
            row.update({
                "mean_before": float(chunk["before"].mean()), "mean_after": float(chunk["after"].mean()),
                "strength_before": float((chunk["before"] - 0.5).abs().mean()),
                "strength_after": float((chunk["after"] - 0.5).abs().mean()),
            })
            rows.append(row)
    order = (["model"] if by_model else []) + [
        "change", "group", "n_models", "n_items", "n_pairs", "r", "r_low", "r_high", "sd_ratio", "sd_ratio_low",
        "sd_ratio_high", "slope", "slope_low", "slope_high", "same_choice", "same_choice_low", "same_choice_high",
        "slope_within", "slope_within_low", "slope_within_high", "r_within", "r_within_low", "r_within_high",
        "sd_ratio_within", "sd_ratio_within_low", "sd_ratio_within_high",
        "mean_before", "mean_after", "strength_before", "strength_after"]
    return pd.DataFrame(rows, columns=order)


def _as_carry_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    """`paired_with_english` pairs in the before/after shape `_carry_sums` reads."""
    renamed = pairs.rename(columns={"soft_en": "before", "soft": "after", "binary_en": "binary_before",
                                    "binary": "binary_after"})
    return renamed.dropna(subset=["before", "after"])


def carry_point(pairs: pd.DataFrame) -> dict[str, float]:
    """`CARRY_MEASURES` of `paired_with_english` pairs: the paper's slope, r and sd_ratio over every
    pair pooled as it is, same_choice, and the within-model fit (as in `carry_over_table`); NaN without
    pairs."""
    nan = dict.fromkeys(CARRY_MEASURES, np.nan)
    chunk = _as_carry_pairs(pairs)
    if chunk.empty:
        return nan
    clusters = pd.Index(np.sort(chunk["base_id"].unique()))
    sums = _carry_sums(chunk, clusters, sorted(chunk["model"].unique()))
    values = _carry_statistic(sums.sum(axis=0)[None, :])[0]
    return {name: float(value) for name, value in zip(CARRY_MEASURES, values)}
