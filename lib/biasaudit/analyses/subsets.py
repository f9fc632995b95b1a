"""The main results within subsets of the items: by source (chapter 14), by social dimension
(chapter 15), and with faithful translations only (chapter 16)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from biasaudit.analyses import stats
from biasaudit.analyses.carry_over import carry_point
from biasaudit.analyses.drops import cells_from_pairs, empty_cells
from biasaudit.analyses.scores import (
    column_sums_by_cluster,
    english_rewording_pairs,
    item_scores,
    paired_with_english,
)
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions

SOURCE_ORDER: tuple[str, ...] = ("stereoset", "bbq", "written")


def _item_drop_interval(pairs: pd.DataFrame, options: StudyOptions, key: tuple) -> tuple[float, float, float]:
    """(drop, low, high): each base item's change averaged over every model and language it has,
    then the mean over items of minus that change, with a percentile bootstrap over items."""
    if pairs.empty:
        return np.nan, np.nan, np.nan
    per_item = pairs.groupby("base_id")["change"].mean()
    return stats.bootstrap_mean_ci(-per_item.to_numpy(), n_boot=options.n_bootstrap, level=options.level,
                                   seed=[options.seed, stats.group_seed_key(key)])


def by_source(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    groups: dict[str, list[str]] | None = None,
) -> pd.DataFrame:
    """The main results within each item source: do StereoSet, BBQ and the written items agree?

    One row per group of sources; by default each source present (stereoset, bbq, written) and,
    when both are present, "bbq + written" (every item not taken from StereoSet). `groups` maps a
    label to the sources it pools. Columns: source (the label), n_items (English bases), n_translated (bases
    with at least one translation), n_models, n_languages, english_soft, english_binary, n_cells
    (model × language cells), cells_below_english (cells whose drop is positive), reliable_drops and
    reliable_rises (cells with BH q < alpha and a positive or negative drop; the family for
    Benjamini–Hochberg is the group's own cells, so each source is tested as if it were the whole
    study), reliable_binary (cells reliable in binary scores, either sign: the paper's Table 9), drop
    with drop_low/drop_high (each base item's change averaged over models and languages, then the mean
    over items of minus it, with a percentile bootstrap over items; positive = lower than English), and
    for translations and for English rewordings the pooled carry-over slope, r and same-choice share
    (`*_translation`, `*_rewording`) with their pair counts. A group without translations has NaN drops and 0 cells.
    """
    scored = item_scores(scores, options.aggregate)
    present = set(scored["source"].dropna())
    if groups is None:
        ordered = [s for s in SOURCE_ORDER if s in present] + sorted(present - set(SOURCE_ORDER))
        groups = {s: [s] for s in ordered}
        if {"bbq", "written"} <= present:
            groups["bbq + written"] = ["bbq", "written"]
    translation = paired_with_english(scored, "translation")
    rewording = english_rewording_pairs(scored)
    rows = []
    for label, members in groups.items():
        english = scored.loc[scored["source"].isin(members) & (scored["variant"] == "original")]
        tr = translation.loc[translation["source"].isin(members)]
        rw = rewording.loc[rewording["source"].isin(members)]
        cells = (cells_from_pairs(tr, "language", options)
                 if len(tr) else empty_cells())
        drop, low, high = _item_drop_interval(tr, options, ("by_source", label))
        carry_tr, carry_rw = carry_point(tr), carry_point(rw)
        reliable = cells["reliable"].astype(bool)
        rows.append({
            "source": label, "n_items": english["base_id"].nunique(), "n_translated": tr["base_id"].nunique(),
            "n_models": english["model"].nunique(), "n_languages": tr["language"].nunique(),
            "english_soft": float(english["soft"].mean()) if len(english) else np.nan,
            "english_binary": float(english["binary"].mean()) if len(english) else np.nan,
            "n_cells": len(cells), "cells_below_english": int((cells["drop"] > 0).sum()),
            "reliable_binary": int(cells["reliable_binary"].astype(bool).sum()),
            "reliable_drops": int((reliable & (cells["drop"] > 0)).sum()),
            "reliable_rises": int((reliable & (cells["drop"] < 0)).sum()),
            "drop": drop, "drop_low": low, "drop_high": high,
            "n_pairs_translation": len(tr), "slope_translation": carry_tr["slope"], "r_translation": carry_tr["r"],
            "same_choice_translation": carry_tr["same_choice"],
            "n_pairs_rewording": len(rw), "slope_rewording": carry_rw["slope"], "r_rewording": carry_rw["r"],
            "same_choice_rewording": carry_rw["same_choice"],
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# By social dimension (chapter 15)
# --------------------------------------------------------------------------------------------


def by_dimension(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    lean: float = 0.05,
) -> pd.DataFrame:
    """The main results per social dimension (gender, race, religion, ...), and how often a
    translation reverses the direction of an item's preference.

    One row per dimension (most English items first), then "all". Columns: dimension, n_items
    (English bases), n_translated, n_models, english_soft, drop with drop_low/drop_high (as in
    `by_source`: per-item change averaged over models and languages, bootstrap over items;
    positive = lower than English), r_translation and r_rewording (correlation of the changed
    version's soft score with the English one, every pair pooled), n_leaning (model ×
    translated-version pairs whose English original leans stereotyped, soft > 0.5 + `lean`),
    n_reversed (those whose translation leans counter-stereotyped, soft < 0.5 − `lean`) and
    reversal_share = n_reversed / n_leaning. Every translated version of an item counts as its
    own pair, so an item in seven languages contributes seven pairs per model.
    """
    if not 0 <= lean < 0.5:
        raise ValueError(f"lean must lie in [0, 0.5), got {lean}")
    scored = item_scores(scores, options.aggregate)
    translation = paired_with_english(scored, "translation")
    rewording = english_rewording_pairs(scored)
    english = scored.loc[scored["variant"] == "original"]
    order = english.groupby("dimension")["base_id"].nunique().sort_values(ascending=False, kind="stable")
    rows = []
    for dimension in [*order.index, "all"]:
        if dimension == "all":
            en, tr, rw = english, translation, rewording
        else:
            en = english.loc[english["dimension"] == dimension]
            tr = translation.loc[translation["dimension"] == dimension]
            rw = rewording.loc[rewording["dimension"] == dimension]
        drop, low, high = _item_drop_interval(tr, options, ("by_dimension", dimension))
        leaning = tr["soft_en"] > 0.5 + lean
        reversed_ = leaning & (tr["soft"] < 0.5 - lean)
        rows.append({
            "dimension": dimension, "n_items": en["base_id"].nunique(), "n_translated": tr["base_id"].nunique(),
            "n_models": en["model"].nunique(), "english_soft": float(en["soft"].mean()) if len(en) else np.nan,
            "drop": drop, "drop_low": low, "drop_high": high,
            "r_translation": carry_point(tr)["r"], "r_rewording": carry_point(rw)["r"],
            "n_leaning": int(leaning.sum()), "n_reversed": int(reversed_.sum()),
            "reversal_share": float(reversed_.sum() / leaning.sum()) if leaning.sum() else np.nan,
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Faithful translations (chapter 16)
# --------------------------------------------------------------------------------------------


def version_similarity(similarity: pd.DataFrame, *, threshold: float = 0.9) -> pd.DataFrame:
    """One row per item version: item_id, similarity (mean when a version was judged more than
    once) and faithful = similarity ≥ `threshold`. `similarity` is the judging stage's table
    (runs/<run>/similarity.parquet: columns item_id and similarity, one row per version)."""
    missing = {"item_id", "similarity"} - set(similarity.columns)
    if missing:
        raise KeyError(f"the similarity table needs columns item_id and similarity; {sorted(missing)} missing "
                       f"(it has {list(similarity.columns)})")
    table = similarity.groupby("item_id", as_index=False)["similarity"].mean()
    table["faithful"] = table["similarity"] >= threshold
    return table


def _translation_pairs_with_similarity(scores: pd.DataFrame, similarity: pd.DataFrame | None, threshold: float,
                                       aggregate: str) -> pd.DataFrame:
    pairs = paired_with_english(item_scores(scores, aggregate), "translation")
    if similarity is None:
        return pairs.assign(similarity=np.nan, faithful=np.nan)
    judged = version_similarity(similarity, threshold=threshold)
    pairs = pairs.merge(judged, on="item_id", how="left")
    pairs["faithful"] = pairs["faithful"].astype("boolean")
    return pairs


KEPT_SUBSETS: tuple[str, ...] = ("all", "faithful", "faithful, equal fluency")
# The paper's "equal fluency": a version's fluency within this of its English original's.
FLUENCY_GAP = 0.1


def kept_translations(
    scores: pd.DataFrame,
    similarity: pd.DataFrame | None,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    threshold: float = 0.9,
    fluency_gap: float = FLUENCY_GAP,
) -> pd.DataFrame:
    """The drops and the carry-over slope when only some translations are kept (the paper's Table 6): all of
    them; the faithful ones (similarity ≥ `threshold`, `version_similarity`); and the faithful ones the model
    also handles about as fluently as English (|fluency − English fluency| < `fluency_gap`, per model). A BBQ
    version has no fluency (its third option is an "unknown" answer, not an unrelated sentence), so it drops
    out of the last subset, as in the paper.

    One row per subset × language, then per subset "mean": the languages' drops weighted equally, n_pairs their
    total and the slope over all its pairs. Columns: subset, language, n_pairs, drop (English mean − language
    mean over the model × version pairs; positive = lower than English), slope (`carry_point`, every pair pooled
    as it is). Without a similarity table only "all"."""
    scored = item_scores(scores, options.aggregate)
    pairs = _translation_pairs_with_similarity(scores, similarity, threshold, options.aggregate)
    pairs = pairs.dropna(subset=["change"])
    fluency = scored.set_index(["model", "item_id"])["fluency"]
    english = scored.loc[scored["variant"] == "original"].set_index(["model", "base_id"])["fluency"]
    gap = (pairs.join(fluency, on=["model", "item_id"])["fluency"]
           - pairs.join(english, on=["model", "base_id"])["fluency"]).abs()
    kept = {"all": pairs}
    if similarity is not None:
        faithful = pairs["faithful"].fillna(False).astype(bool)
        kept.update({"faithful": pairs.loc[faithful],
                     "faithful, equal fluency": pairs.loc[faithful & (gap < fluency_gap)]})
    rows = []
    for subset, chunk in kept.items():
        by = chunk.groupby("language", sort=True)
        languages = [{"subset": subset, "language": language, "n_pairs": len(group),
                      "drop": float(-group["change"].mean()), "slope": carry_point(group)["slope"]}
                     for language, group in by]
        rows += languages
        rows.append({"subset": subset, "language": "mean", "n_pairs": len(chunk),
                     "drop": float(np.mean([row["drop"] for row in languages])) if languages else np.nan,
                     "slope": carry_point(chunk)["slope"]})
    return pd.DataFrame(rows, columns=["subset", "language", "n_pairs", "drop", "slope"])


def faithful_only(
    scores: pd.DataFrame,
    similarity: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    threshold: float = 0.9,
) -> pd.DataFrame:
    """Drops with all translations and with faithful translations only, per language and averaged.

    A translated version is faithful when its similarity (from `similarity`, see
    `version_similarity`) is at least `threshold`; versions the table does not judge count as not
    faithful and are reported in n_unjudged. One row per language, then "mean" (the languages
    weighted equally, over the languages with at least one faithful version). Columns: language,
    n_all and n_faithful (model × version pairs), share_faithful, n_unjudged, drop_all and
    drop_faithful (English mean − language mean on the paired items, pooled over models; positive
    = lower than English), each with a percentile bootstrap interval over base items, and
    reduction = drop_all − drop_faithful with a *paired* interval (each resample of base items
    gives both drops, so the interval is that of the difference itself).
    """
    pairs = _translation_pairs_with_similarity(scores, similarity, threshold, options.aggregate)
    pairs = pairs.dropna(subset=["change"])
    languages = sorted(pairs["language"].unique())
    clusters = pd.Index(np.sort(pairs["base_id"].unique()))
    faithful = pairs.loc[pairs["faithful"].fillna(False).astype(bool)]
    sums = np.column_stack([column_sums_by_cluster(pairs, "language", "change", clusters, languages),
                            column_sums_by_cluster(faithful, "language", "change", clusters, languages)])
    k = len(languages)
    n_faithful = faithful.groupby("language").size().reindex(languages, fill_value=0).to_numpy()
    used = n_faithful > 0

    def statistic(totals: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            drop_all = -totals[:, :k] / totals[:, k:2 * k]
            drop_faithful = -totals[:, 2 * k:3 * k] / totals[:, 3 * k:]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_all = np.nanmean(drop_all[:, used], axis=1) if used.any() else np.full(len(totals), np.nan)
            mean_faithful = np.nanmean(drop_faithful[:, used], axis=1) if used.any() else np.full(len(totals), np.nan)
        drop_all = np.column_stack([drop_all, mean_all])
        drop_faithful = np.column_stack([drop_faithful, mean_faithful])
        return np.column_stack([drop_all, drop_faithful, drop_all - drop_faithful])

    columns = ["language", "n_all", "n_faithful", "share_faithful", "n_unjudged", "drop_all", "drop_all_low",
               "drop_all_high", "drop_faithful", "drop_faithful_low", "drop_faithful_high", "reduction",
               "reduction_low", "reduction_high"]
    if not languages:
        return pd.DataFrame(columns=columns)
    estimate, low, high = stats.bootstrap_sums(sums, statistic, n_boot=options.n_bootstrap, level=options.level,
                                               seed=[options.seed, stats.group_seed_key(("faithful_only",))])
    rows = []
    for j, language in enumerate([*languages, "mean"]):
        mine = pairs if language == "mean" else pairs.loc[pairs["language"] == language]
        if language == "mean":
            mine = mine.loc[mine["language"].isin(np.array(languages)[used])]
        n_all = len(mine)
        n_f = int(mine["faithful"].fillna(False).astype(bool).sum())
        row = {"language": language, "n_all": n_all, "n_faithful": n_f,
               "share_faithful": n_f / n_all if n_all else np.nan, "n_unjudged": int(mine["similarity"].isna().sum())}
        for offset, name in ((0, "drop_all"), (k + 1, "drop_faithful"), (2 * (k + 1), "reduction")):
            row[name], row[f"{name}_low"], row[f"{name}_high"] = (float(estimate[offset + j]), float(low[offset + j]),
                                                                   float(high[offset + j]))
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


# The paper's subsets by contrast judgment: the judgments each keeps.
CONTRAST_SUBSETS: dict[str, tuple[str, ...]] = {"contrast preserved": ("preserved",),
                                                "contrast not lost": ("preserved", "partly")}


def judged_versions(versions: pd.DataFrame, judgments: pd.DataFrame, kinds: tuple[str, ...]) -> pd.DataFrame:
    """The (base_id, language) of the translated versions whose contrast judgment is one of `kinds`.

    `versions` has item_id, base_id and language (scores or pairs); `judgments` one row per judged version
    (item_id, judgment), as the release's contrast judgments. A version no judgment names is left out."""
    kept = judgments.loc[judgments["judgment"].isin(kinds), "item_id"]
    chosen = versions.loc[versions["item_id"].isin(kept), ["base_id", "language"]]
    return chosen.drop_duplicates().reset_index(drop=True)


def against_rewording(
    scores: pd.DataFrame,
    similarity: pd.DataFrame | None = None,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    threshold: float = 0.9,
    judgments: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Does translating an item lower its score more than rewording it does? Item by item, per language.

    For each base item: its translation drop in language L (English soft − soft in L, averaged over
    models) and its rewording drop (English − reworded English, averaged over models and rewording
    routes); excess_drop = translation drop − rewording drop, on the items that have both (positive:
    translation lowers the score more than rewording does; the book's sign for every drop). Per
    language: the mean excess drop with a percentile bootstrap interval over items and a paired
    sign-flip test over items, with Benjamini–Hochberg across the languages of each subset.

    Subsets: "all items"; "faithful in every language" (with `similarity`: only base items whose
    translation is faithful, similarity ≥ `threshold`, in every language the item has; the same items
    in every language); "contrast preserved" (with `judgments`, one row per translated version with its
    item_id and judgment, as the release's contrast judgments: only the versions judged `preserved`, the
    paper's subset of that name) and "contrast not lost" (with `judgments`: the versions judged preserved or
    partly preserved); "without StereoSet" (only when the table has StereoSet
    translations). Columns:
    subset, language, n_items, translation_drop, rewording_drop, excess_drop, low, high, p, q,
    reliable.
    """
    scored = item_scores(scores, options.aggregate)
    pairs = _translation_pairs_with_similarity(scores, similarity, threshold, options.aggregate)
    rewording = (-english_rewording_pairs(scored).groupby("base_id")["change"].mean()).rename("rewording_drop")
    per_item = (pairs.assign(drop=-pairs["change"]).groupby(["base_id", "language"], as_index=False)
                .agg(translation_drop=("drop", "mean"), source=("source", "first")))
    per_item = per_item.merge(rewording, left_on="base_id", right_index=True).dropna(
        subset=["translation_drop", "rewording_drop"])
    per_item["excess_drop"] = per_item["translation_drop"] - per_item["rewording_drop"]
    subsets: dict[str, pd.DataFrame] = {"all items": per_item}
    if similarity is not None:
        kept = pairs.groupby("base_id")["faithful"].agg(lambda f: bool(f.fillna(False).all()))
        subsets["faithful in every language"] = per_item.loc[per_item["base_id"].isin(kept.index[kept])]
    if judgments is not None:
        for subset, kinds in CONTRAST_SUBSETS.items():
            subsets[subset] = per_item.merge(judged_versions(pairs, judgments, kinds), on=["base_id", "language"])
    if (per_item["source"] == "stereoset").any():
        subsets["without StereoSet"] = per_item.loc[per_item["source"] != "stereoset"]
    columns = ["subset", "language", "n_items", "translation_drop", "rewording_drop", "excess_drop", "low",
               "high", "p", "q", "reliable"]
    frames = []
    for subset, table in subsets.items():
        if table.empty:
            continue
        tests = stats.sign_flip_tests(table, by=["language"], value="excess_drop",
                                      n_permutations=options.n_permutations, seed=options.seed)
        tests = stats.add_bh(tests, alpha=options.alpha)
        rows = []
        for language, group in table.groupby("language", sort=True):
            # seeded by the language alone: a subset that holds the same items as another shows the same interval
            _, low, high = stats.bootstrap_mean_ci(
                group["excess_drop"].to_numpy(), n_boot=options.n_bootstrap, level=options.level,
                seed=[options.seed, stats.group_seed_key(("against_rewording", language))])
            rows.append({"subset": subset, "language": language, "n_items": len(group),
                         "translation_drop": float(group["translation_drop"].mean()),
                         "rewording_drop": float(group["rewording_drop"].mean()),
                         "excess_drop": float(group["excess_drop"].mean()), "low": low, "high": high})
        frames.append(pd.DataFrame(rows).merge(tests[["language", "p", "q", "reliable"]], on="language"))
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


