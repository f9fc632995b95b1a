"""Chapter 18: when translation moves an item's score, do different models move it the same way?"""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts, paper
from biasaudit.book.prose import language_names, value_range
from biasaudit.book.report import Report, TableStyle
from biasaudit.data.languages import language_label
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

TABLE_STYLE = TableStyle(columns={
    "kind": "kind", "group": "language or route", "n_items": "items", "n_models": "models",
    "n_model_pairs": "model pairs", "agreement_scores": "r of scores", "agreement_change": "r of changes",
    "sd_change": "SD of changes", "center": "neutral item lands at"})
# The same rows after adjusting for surface properties, as a second table (one would not fit the page).
ADJUSTED_STYLE = TableStyle(columns={
    "kind": "kind", "group": "language or route", "features": "surface properties", "r2_model": "R² (model)",
    "r2": "R² (model + surface)", "agreement_change_adjusted": "r of changes, adjusted",
    "sd_change_adjusted": "SD, adjusted", "center_adjusted": "neutral item, adjusted"})


def agreement_text(agreement: pd.DataFrame, n_models: int) -> str:
    translations = agreement.loc[agreement["kind"] == "translation"]
    rewordings = agreement.loc[agreement["kind"] == "rewording"]
    if n_models < 2:
        return (f"This run has {n_models} model, so there is no pair of models to compare: agreement needs at least "
                "two (the paper's released scores have ten; use params/released.yml with the download). The spread "
                "and the center below need only one.")
    english = agreement.loc[agreement["kind"] == "original"].iloc[0]
    return (f"In English, models agree on the items' scores with r = {english['agreement_scores']:.2f}. After "
            f"translation they agree on the scores with r = {translations['agreement_scores'].mean():.2f} on average "
            f"over languages, and on the changes with r = {translations['agreement_change'].mean():.2f} (from "
            f"{translations['agreement_change'].min():.2f} to {translations['agreement_change'].max():.2f})"
            + rewording_clause(rewordings["agreement_change"]))


def rewording_clause(changes: pd.Series) -> str:
    """The rewordings' agreement beside the translations': where no two models scored the same rewordings (a
    model scored here without the release's rewording texts), there is none to give."""
    if changes.dropna().empty:
        return ("; no two models scored the same English rewordings, so there is no agreement on the changes "
                "rewording makes to set beside it." if len(changes) else ".")
    return f", against r = {changes.mean():.2f} for the changes rewording makes."


def center_text(center: float) -> str:
    if abs(center - 0.5) < 0.02:
        return ("close to 0.5: translation does not push an item without English preference towards either side, so "
                "the drops come from items that had a preference losing part of it (a squeeze towards 0.5)")
    side, lean = ("below", "anti-stereotyped") if center < 0.5 else ("above", "stereotyped")
    return (f"{side} 0.5: translation pushes items without English preference towards the {lean} side, on top of any "
            "squeeze of the items that had one")


def frequency_text(support: pd.DataFrame, frequency: bool) -> str:
    missing = support.loc[~support["available"]]
    if not frequency:
        return "Word frequencies are switched off (frequency = False)."
    if missing.empty:
        return "wordfreq covers every language of this run."
    return ("Not covered: " + "; ".join(f"{language_label(row.language)}: {row.note}" for row in missing.itertuples())
            + ". In those languages the regression uses the other properties only.")


def surface_text(agreement: pd.DataFrame, n_models: int) -> str:
    fitted = agreement.loc[agreement["r2"].notna()]
    if fitted.empty:
        return ("This run's scores carry neither token counts nor continuation texts (the paper's released scores are "
                "of this kind), so no surface property can be measured and the regression is left out.")
    translated = fitted.loc[fitted["kind"] == "translation"]
    text = (f"Per group, the changes are regressed on the model (one level per model) and on the surface properties "
            f"available there. The model alone explains R² = {fitted['r2_model'].mean():.3f} on average; with the "
            f"surface properties R² = {fitted['r2'].mean():.3f} (from {fitted['r2'].min():.3f} to "
            f"{fitted['r2'].max():.3f}). ")
    if n_models > 1:
        return text + (f"With the surface part removed, models agree on the translation changes with r = "
                       f"{translated['agreement_change_adjusted'].mean():.2f} (as scored: "
                       f"{translated['agreement_change'].mean():.2f}), the changes spread with an SD of "
                       f"{translated['sd_change_adjusted'].mean():.3f}, and a neutral item lands at "
                       f"{translated['center_adjusted'].mean():.3f}.")
    return text + (f"With the surface part removed, the translation changes spread with an SD of "
                   f"{translated['sd_change_adjusted'].mean():.3f}.")


def r2_text(agreement: pd.DataFrame) -> str:
    """The R² with the surface properties, in one clause (exercise 1 sets it with and without frequencies)."""
    fitted = agreement["r2"].dropna()
    if fitted.empty:
        return "no surface property can be measured on this run's scores"
    return f"the model and the surface properties explain R² = {fitted.mean():.3f} on average"


LENGTH_STYLE = TableStyle(columns={
    "language": "language", "n_pairs": "pairs", "agreement_change": "r of changes",
    "agreement_length": "r of changes, lengths removed", "r2_length": "R² of the lengths",
    "agreement_length_frequency": "r of changes, lengths and word frequencies removed",
    "r2_length_frequency": "R² of lengths and frequencies"}, formats={"language": language_label})
MATCHED_STYLE = TableStyle(columns={"pairs": "translation pairs", "n_pairs": "pairs", "drop": "drop",
                                    "slope": "carry-over slope"})


def length_text(fit: pd.DataFrame, matched: pd.DataFrame) -> str:
    if fit.empty:
        return ("This run's scores carry no token counts, so the paper's length fit cannot be made here (the released "
                "scores have them where the release's token_counts.csv is at hand).")
    by = matched.set_index("pairs")
    equal, every = by.loc["equal length"], by.loc["all"]
    with_frequency = fit.dropna(subset=["r2_length_frequency"])
    if with_frequency.empty:
        frequency = (" Word frequencies are not added: wordfreq gives word frequencies for too few pairs in every "
                     "language (or the run has no continuation texts, or frequency is off).")
    else:
        r2 = with_frequency["r2_length_frequency"]
        frequency = (f" With the words' frequencies added (in {language_names(with_frequency['language'].tolist())}, "
                     "where wordfreq gives word frequencies for more than 90% of the pairs), the R² is "
                     f"{value_range(r2.min(), r2.max(), 3)}.")
    alone = (" The models' agreement is not shown: it needs at least two models."
             if fit["agreement_change"].isna().all() else "")
    return (f"Fitted to the changes per language, the lengths' R² is "
            f"{value_range(fit['r2_length'].min(), fit['r2_length'].max(), 3)}."
            f"{frequency}{alone} On the {int(equal['n_pairs']):,} pairs whose two continuations have as many tokens as each "
            f"other, in the version and in English, the drop is {equal['drop']:.3f} and the slope "
            f"{equal['slope']:.2f}, against {every['drop']:.3f} and {every['slope']:.2f} on all "
            f"{int(every['n_pairs']):,} pairs: where the drop stays on pairs of equal length, length is not what "
            "makes it.")


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    agreement = study.computed("model_agreement", lambda: analyses.model_agreement(
        study.scores, study.options, frequency=params.frequency), params.frequency)
    n_models = int(study.scores["model"].nunique())
    support = analyses.word_frequency_support(sorted(study.scores["language"].unique()))
    translations = agreement.loc[agreement["kind"] == "translation"]
    rewordings = agreement.loc[agreement["kind"] == "rewording"]
    center = float(translations["center"].mean())
    out = Report()
    out.add_table("agreement", agreement, TABLE_STYLE)
    out.add_table("adjusted", agreement.loc[agreement["r2"].notna()], ADJUSTED_STYLE)
    out.add_table("support", support)
    out.values.update({
        "n_models": n_models, "agreement_text": agreement_text(agreement, n_models),
        "sd_translation": float(translations["sd_change"].mean()),
        "sd_rewording": float(rewordings["sd_change"].mean()) if len(rewordings) else float("nan"),
        "center_translation": center, "center_text": center_text(center),
        "frequency_text": frequency_text(support, params.frequency),
        "surface_text": surface_text(agreement, n_models), "r2_text": r2_text(agreement),
    })
    fit = study.computed("length_fit", lambda: analyses.length_fit(study.scores, params.aggregate,
                                                                   frequency=params.frequency), params.frequency)
    matched = study.computed("length_matched", lambda: analyses.length_matched(study.scores, params.aggregate))
    out.add_table("length", fit, LENGTH_STYLE)
    out.add_table("matched", matched, MATCHED_STYLE)
    out.values["length_text"] = length_text(fit, matched)
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    out.figures["paper"] = paper.block(paper.surface_rows(paper.read_json(folder, "review2_checks.json"), fit,
                                                          matched), "review2_checks.json") if folder else None
    changed = agreement.loc[agreement["kind"] != "original"].assign(row=lambda t: t["kind"] + " · " + t["group"])
    out.figures["agreement"] = charts.paired_bars(
        changed, label="row", columns={"agreement_change": "as scored", "agreement_change_adjusted": "surface removed"},
        x_title="mean r between models of the per-item changes", what="changes",
        title="Do models agree on which items move?")
    out.figures["r2"] = charts.paired_bars(
        changed, label="row", columns={"r2_model": "model only", "r2": "model + surface"}, what="regressors",
        x_title="R² of the per-item changes", title="How much surface properties explain")
    return out
