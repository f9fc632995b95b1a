"""Chapter 13: when an item is reworded or translated, does the model keep that item's preference?"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts, explore, paper
from biasaudit.book.prose import language_names
from biasaudit.book.report import Report, TableStyle, with_interval
from biasaudit.data.languages import language_label
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

TABLE_STYLE = TableStyle(columns={
    "change": "change", "group": "route or language", "n_models": "models", "n_items": "items", "n_pairs": "pairs",
    "r": "r", "sd_ratio": "SD ratio", "shown_slope": "slope [95%]", "slope_within": "slope within models",
    "same_choice": "same choice", "strength_before": "strength before", "strength_after": "strength after"},
    percent=("same_choice",))


def pooled(table: pd.DataFrame, change: str) -> pd.Series:
    """The row of `change` that pools its groups ("all"), or its only group."""
    rows = table.loc[table["change"] == change]
    return rows.loc[rows["group"] == "all"].iloc[0] if (rows["group"] == "all").any() else rows.iloc[0]


def within_language_text(table: pd.DataFrame, rewording: pd.Series, same_items: pd.DataFrame) -> str:
    within = table.loc[table["change"] == "within-language rewording"]
    if within.empty:
        return ("This run has no rewordings of translated items, so within-language carry-over cannot be "
                "measured here.")
    row = pooled(table, "within-language rewording")
    languages = language_names(sorted(within.loc[within["group"] != "all", "group"]))
    text = (f"This run has rewordings within {languages}. Rewording within a language keeps a slope of "
            f"{row['slope']:.2f} (95% interval {row['slope_low']:.2f} to {row['slope_high']:.2f}; r {row['r']:.2f}, "
            f"same choice {row['same_choice']:.0%}), against {rewording['slope']:.2f} for rewording English.")
    same = [f"{language_label(r.language)}, {r.n_items} items: {r.slope_within:.2f} reworded within the language, "
            f"{r.slope_translation:.2f} translated from English, {r.slope_rewording:.2f} reworded in English"
            for r in same_items.itertuples()]
    if same:
        text += " On the same items, the slopes are: " + "; ".join(same) + "."
    return text


def preserved_text(table: pd.DataFrame, preserved: pd.DataFrame | None) -> str:
    if preserved is None:
        return ("This run has no contrast judgments (they come with the paper's released scores), so the "
                "translations cannot be split by whether their contrast survived.")
    if preserved.empty:
        return "No translation of this run is judged to keep its contrast, so there is nothing to measure."
    mine, every = pooled(preserved, "translation"), pooled(table, "translation")
    return (f"On the {int(mine['n_pairs']):,} translated pairs whose contrast is preserved "
            f"({int(mine['n_items'])} base items), the slope is {mine['slope']:.2f} (95% interval {mine['slope_low']:.2f} to "
            f"{mine['slope_high']:.2f}) and r {mine['r']:.2f}, against {every['slope']:.2f} and {every['r']:.2f} "
            "with every translation. Where the two are close, lost contrasts are not what scrambles the items.")


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    pairs = analyses.carry_over_pairs(study.scores, params.aggregate)
    table = study.carry_over()
    same_items = analyses.within_language_same_items(pairs)
    out = Report()
    shown = table.assign(shown_slope=with_interval(table["slope"], table["slope_low"], table["slope_high"]))
    out.add_table("table", shown, TABLE_STYLE)
    out.add_table("within", shown.loc[shown["change"] == "within-language rewording"], replace(TABLE_STYLE, empty=""))
    rewording, translation = pooled(table, "rewording"), pooled(table, "translation")
    for name, row in (("rw", rewording), ("tr", translation)):
        for measure in ("slope", "r", "sd_ratio", "same_choice"):
            out.values[f"{name}_{measure}"] = float(row[measure])
        out.values[f"{name}_slope_ci"] = f"{row['slope_low']:.2f} to {row['slope_high']:.2f}"
        out.values[f"{name}_pairs"] = int(row["n_pairs"])
    translations = table.loc[(table["change"] == "translation") & (table["group"] != "all")]
    weakest = translations.loc[translations["strength_after"].idxmin()]
    out.values.update({
        "n_models": int(pairs["model"].nunique()), "n_items": int(pairs["base_id"].nunique()),
        "strength_en": float(translation["strength_before"]), "strength_tr": float(translation["strength_after"]),
        "weakest_language": str(weakest["group"]), "weakest_strength": float(weakest["strength_after"]),
        "n_weaker": int((translations["strength_after"] < translations["strength_before"]).sum()),
        "n_translations": len(translations), "within_text": within_language_text(table, rewording, same_items),
    })
    judgments = pipeline.read_judgments(params)
    preserved = None if judgments is None else study.computed("carry_over_preserved", lambda: analyses.carry_over_table(
        study.scores, study.options, pairs=analyses.translations_kept(
            pairs, analyses.judged_versions(study.scores, judgments, ("preserved",)))), "preserved")
    out.add_table("preserved", pd.DataFrame(columns=shown.columns) if preserved is None else preserved.assign(
        shown_slope=with_interval(preserved["slope"], preserved["slope_low"], preserved["slope_high"])),
        replace(TABLE_STYLE, empty=""))
    out.values["preserved_text"] = preserved_text(table, preserved)
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    if folder:
        quality = paper.read_json(folder, "translation_quality.json").get("association", {}).get("preserved", {})
        within = paper.read_json(folder, "translation_quality.json").get("within", {})
        rows = (paper.carry_rows(paper.read_json(folder, "paper_numbers.json"), table)
                + paper.association_rows(paper.read_json(folder, "association_and_dimensions.json").get(
                    "association", {}), table, params.n_bootstrap)
                + paper.association_rows(within, table, params.n_bootstrap, plain="within-language rewording")
                + (paper.association_rows(quality, preserved, params.n_bootstrap, subset="contrast preserved")
                   if preserved is not None and len(preserved) else [])
                + paper.within_rows(paper.read_json(folder, "review_runs.json"), same_items))
        out.figures["paper"] = paper.block(rows, "paper_numbers.json, association_and_dimensions.json, "
                                                 "translation_quality.json, review_runs.json")
    else:
        out.figures["paper"] = None
    out.figures["density"] = charts.carry_over_density(pairs, table)
    translated = explore.translated_items(study.scores, params.aggregate)
    out.figures["explore"] = explore.carry_over_explorer(
        translated, seed=params.seed, title="Each translation's soft score against its English original's"
    ) if len(translated) else None  # within_text and the table say the run has no translations
    out.figures["intervals"] = charts.carry_over_intervals(table)
    out.figures["strength"] = charts.strength_bars(table)
    return out
