"""Chapter 21: what do the averages look like for one item, in every language and model?"""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts
from biasaudit.book.report import Report, TableStyle, spoken_list
from biasaudit.data.languages import language_label
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

TEXTS_STYLE = TableStyle(columns={"item_id": "item", "language": "language", "variant": "variant", "via": "made by",
                                  "context": "context", "stereotyped": "stereotyped",
                                  "anti_stereotyped": "anti-stereotyped"})
CASE_STYLE = TableStyle(columns={"model": "model", "language": "language", "variant": "variant", "via": "made by",
                                 "soft": "soft", "choice": "choice", "drop": "drop (English − version)"})


def translations_text(case: pd.DataFrame) -> tuple[str, str, str]:
    """(which models keep the stereotyped choice, the largest fall, the rewordings' scores)."""
    english = case.loc[case["variant"] == "original"]
    translations = case.loc[case["variant"] == "translation"]
    rewordings = case.loc[(case["variant"] == "rewording") & (case["language"] == "en")]
    kept = translations.groupby("model")["choice"].apply(lambda c: int((c == "stereotyped").sum()))
    lines = [f"{model} keeps the stereotyped choice in {n} of {int((translations['model'] == model).sum())} "
             "translations" for model, n in kept.items()]
    kept_text = "; ".join(lines) + "." if lines else "This run has no translations of the item."
    if len(translations) and translations["drop"].max() > 0:
        lowest = translations.loc[translations["drop"].idxmax()]
        lowest_text = (f"The largest fall is in {language_label(lowest['language'])} for {lowest['model']}: "
                       f"{lowest['soft']:.3f}, {lowest['drop']:.3f} below its English score. ")
    elif len(translations):
        lowest_text = "No translation scores below its model's English score. "
    else:
        lowest_text = "No translation to compare"
    if len(translations):
        lowest_text += (f"Over models and languages the item's translated score is {translations['soft'].mean():.3f} "
                        f"on average, against {english['soft'].mean():.3f} in English")
    return kept_text, lowest_text, rewording_sentence(rewordings["soft"])


def rewording_sentence(soft: pd.Series) -> str:
    """The tail of the case's score sentence: the English rewordings' scores (one, all equal, or a range)."""
    if soft.empty:
        return "."
    if len(soft) == 1:
        return f"; its one English rewording scores {soft.iloc[0]:.3f}."
    if f"{soft.min():.3f}" == f"{soft.max():.3f}":
        return f"; its {len(soft)} English rewordings all score {soft.iloc[0]:.3f}."
    return (f"; its {len(soft)} English rewordings score {soft.mean():.3f} on average (from {soft.min():.3f} to "
            f"{soft.max():.3f}).")


def how_chosen(wanted: str, found: str) -> str:
    """Why the chapter follows its item: the `base_id` parameter, or the automatic choice (also where the
    item asked for is not in this run's scores)."""
    automatic = "chosen because its English original leans most strongly to the stereotype in every model"
    if wanted and found:
        return "chosen with the base_id parameter"
    if wanted:
        return f"{automatic}: the item the base_id parameter names, {wanted}, is not in this run's scores"
    return automatic


def unscored_text(scores: pd.DataFrame, base_id: str) -> str:
    """The run's models that did not score the item (a model scored beside the paper's ten on a sample of its
    items), named, so that a missing column reads as what it is."""
    missing = sorted(set(scores["model"]) - set(scores.loc[scores["base_id"] == base_id, "model"]))
    if not missing:
        return ""
    return (f" {spoken_list(missing)} did not score this item (it is not in the sample of the paper's items "
            f"{'that model' if len(missing) == 1 else 'those models'} scored: set paper_sample to 0, or base_id to "
            "an item of the sample), so the tables and the chart leave "
            f"{'it' if len(missing) == 1 else 'them'} out.")


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    asked = params.base_id if params.base_id in set(study.scores["base_id"]) else ""
    case = analyses.case_study(study.scores, asked, study.options)
    chosen = case["base_id"].iloc[0]
    english = case.loc[case["variant"] == "original"]
    texts = case.drop_duplicates("item_id")
    out = Report()
    out.add_table("texts", texts, TEXTS_STYLE)
    out.add_table("case", case, CASE_STYLE)
    kept_text, lowest_text, rewording_text = translations_text(case)
    out.values.update({
        "base_id": chosen,
        "how_chosen": how_chosen(params.base_id, asked),
        "source": str(case["source"].iloc[0]), "dimension": str(case["dimension"].iloc[0]),
        "english_scores": ", ".join(f"{s:.3f} ({m})" for m, s in zip(english["model"], english["soft"])),
        "texts_text": ("" if texts["stereotyped"].notna().any() else
                       " This run's scores carry no continuation texts (the released scores do not), so only the "
                       "contexts are shown.") + unscored_text(study.scores, chosen),
        "kept_text": kept_text, "lowest_text": lowest_text, "rewording_text": rewording_text,
    })
    out.figures["heatmap"] = charts.case_heatmap(case, title=f"Soft score of {chosen} by version and model")
    return out
