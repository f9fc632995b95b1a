"""Chapter 15: are the drops and lost preferences spread over every social dimension, or concentrated?"""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts, paper
from biasaudit.book.report import Report, TableStyle, with_interval
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

TABLE_STYLE = TableStyle(columns={
    "dimension": "dimension", "n_items": "items", "n_translated": "translated", "n_models": "models",
    "english_soft": "English soft", "shown_drop": "drop (English − language) [95%]"})
# The same rows, for the section on whether items keep their preference (one table would not fit the page).
KEEPS_STYLE = TableStyle(columns={
    "dimension": "dimension", "r_translation": "r (translation)", "r_rewording": "r (rewording)",
    "n_leaning": "leaning pairs", "n_reversed": "reversed", "reversal_share": "reversal share"},
    percent=("reversal_share",))


def drop_text(dimensions: pd.DataFrame) -> str:
    if dimensions.empty:
        return "This run has no translated items, so no dimension has a drop."
    top, bottom = dimensions.loc[dimensions["drop"].idxmax()], dimensions.loc[dimensions["drop"].idxmin()]
    above = dimensions.loc[dimensions["drop_low"] > 0, "dimension"].tolist()
    return (f"The drop is largest for {top['dimension']} ({top['drop']:.3f}, 95% interval {top['drop_low']:.3f} to "
            f"{top['drop_high']:.3f}) and smallest for {bottom['dimension']} ({bottom['drop']:.3f}, "
            f"{bottom['drop_low']:.3f} to {bottom['drop_high']:.3f}). "
            + (f"The interval lies wholly above zero for {', '.join(above)}." if above
               else "No dimension's interval lies wholly above zero."))


def reversal_text(dimensions: pd.DataFrame) -> str:
    ranked = dimensions.dropna(subset=["reversal_share"]).sort_values("reversal_share", ascending=False)
    if len(ranked) < 2:
        return "There are too few leaning pairs to compare dimensions."
    first, last = ranked.iloc[0], ranked.iloc[-1]
    return (f"Reversals are most common for {first['dimension']} ({first['reversal_share']:.0%} of "
            f"{int(first['n_leaning'])} leaning pairs) and least common for {last['dimension']} "
            f"({last['reversal_share']:.0%} of {int(last['n_leaning'])}).")


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    table = study.computed("by_dimension", lambda: analyses.by_dimension(study.scores, study.options,
                                                                         lean=params.lean), params.lean)
    out = Report()
    out.add_table("table", table.assign(shown_drop=with_interval(table["drop"], table["drop_low"], table["drop_high"])),
                  TABLE_STYLE)
    out.add_table("keeps", table, KEEPS_STYLE)
    dimensions = table.loc[(table["dimension"] != "all") & table["drop"].notna()]
    overall = table.loc[table["dimension"] == "all"].iloc[0]
    per_dimension = table.loc[table["dimension"] != "all", "n_items"]
    untranslated = int(overall["n_items"] - overall["n_translated"])
    out.values.update({
        "n_dimensions": len(table) - 1, "n_items": int(overall["n_items"]), "min_items": int(per_dimension.min()),
        "max_items": int(per_dimension.max()), "drop_text": drop_text(dimensions),
        "translated_text": (f"{untranslated} of them have no translation in this run (English only), so the drops, "
                            f"correlations and reversals below come from the other {int(overall['n_translated'])}."
                            if untranslated else "Every one of them has translations."),
        "r_translation": float(overall["r_translation"]), "r_rewording": float(overall["r_rewording"]),
        "n_leaning": int(overall["n_leaning"]), "n_reversed": int(overall["n_reversed"]),
        "reversal_share": float(overall["reversal_share"]), "lean_high": 0.5 + params.lean,
        "lean_low": 0.5 - params.lean, "reversal_text": reversal_text(dimensions),
    })
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    out.figures["paper"] = paper.block(paper.dimension_rows(paper.read_json(folder, "association_and_dimensions.json"),
                                                            table, params.n_bootstrap),
                                       "association_and_dimensions.json") if folder else None
    out.figures["drops"] = charts.forest(table, label="dimension", estimate="drop", low="drop_low", high="drop_high",
                                         title="Drop per dimension (95% bootstrap interval over items)")
    out.figures["correlation"] = charts.paired_bars(
        table, label="dimension", columns={"r_translation": "translation", "r_rewording": "rewording"},
        what="change", x_title="r with the English score", title="Correlation with English per dimension")
    out.figures["reversals"] = charts.paired_bars(
        table, label="dimension", columns={"reversal_share": "reversal share"},
        x_title="share of leaning pairs that reverse after translation", title="Reversals per dimension")
    return out
