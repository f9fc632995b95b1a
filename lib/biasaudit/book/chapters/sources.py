"""Chapter 14: does the picture hold within each source of items, or is one source carrying it?"""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts, paper
from biasaudit.book.report import Report, TableStyle, spoken_list
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

NAMES = {"stereoset": "StereoSet", "bbq": "BBQ", "written": "the written items"}
TABLE_STYLE = TableStyle(columns={
    "source": "source", "n_items": "items", "n_translated": "translated", "n_models": "models",
    "n_languages": "languages", "english_soft": "English soft", "n_cells": "cells",
    "cells_below_english": "cells below English", "reliable_drops": "reliable drops", "reliable_rises": "reliable rises",
    "reliable_binary": "reliable (binary)", "drop": "drop (English − language)", "drop_low": "low", "drop_high": "high",
    "slope_translation": "slope (translation)", "slope_rewording": "slope (rewording)",
    "same_choice_translation": "same choice (translation)", "same_choice_rewording": "same choice (rewording)"},
    percent=("same_choice_translation", "same_choice_rewording"), transpose=True)  # one column per source


def name(source: str) -> str:
    return NAMES.get(source, source)


def sources_text(table: pd.DataFrame) -> str:
    single = table.loc[~table["source"].str.contains(" + ", regex=False)]
    listed = spoken_list([f"{name(s)} ({n} English items)" for s, n in zip(single["source"], single["n_items"])])
    english = spoken_list([f"{v:.3f} for {name(s)}" for s, v in zip(single["source"], single["english_soft"])])
    untranslated = [name(s) for s in single.loc[single["n_translated"] == 0, "source"]]
    if not set(single["source"]) & {"stereoset", "bbq"}:
        text = (f"This run has one source only: {listed}. StereoSet and BBQ are not in it, so the table shows the "
                "written items alone (see below for how to add them).")
    elif untranslated:
        text = (f"This run has {listed}. {spoken_list(untranslated)} are in English only here, so for them the table "
                "gives the English score alone: no drop, cell or carry-over can be computed without translations.")
    else:
        text = f"This run has {listed}, each with its translations."
    return text + f" The mean English soft score is {english}."


def drop_text(table: pd.DataFrame) -> str:
    tested = table.loc[table["n_cells"] > 0]
    single = tested.loc[~tested["source"].str.contains(" + ", regex=False)]
    if single.empty:
        return "No source has translated items in this run, so there is no drop to compare."
    widest = single.loc[single["drop"].idxmax()]
    interval = (f"95% interval {widest['drop_low']:.3f} to {widest['drop_high']:.3f}, over {widest['n_translated']} "
                "items")
    if len(single) == 1:
        text = (f"Over {name(widest['source'])}, the one source with translations in this run, the drop is "
                f"{widest['drop']:.3f} ({interval}).")
    else:
        text = f"The largest drop is in {name(widest['source'])} ({widest['drop']:.3f}, {interval})."
    if len(single) > 1:
        narrowest = single.loc[single["drop"].idxmin()]
        text += (f" The smallest is in {name(narrowest['source'])} ({narrowest['drop']:.3f}, "
                 f"{narrowest['drop_low']:.3f} to {narrowest['drop_high']:.3f}).")
    for row in tested.loc[tested["source"].str.contains(" + ", regex=False)].itertuples():
        text += (f" Pooled, {row.source} drops by {row.drop:.3f} ({row.drop_low:.3f} to {row.drop_high:.3f}, "
                 f"{row.n_translated} items).")
    return text


def reliable_text(table: pd.DataFrame) -> str:
    tested = table.loc[table["n_cells"] > 0]
    return "; ".join(
        f"{row.source}: {row.reliable_drops} of {row.n_cells} cells show a reliable drop"
        + (f" and {row.reliable_rises} a reliable rise" if row.reliable_rises else "")
        for row in tested.itertuples()) or "no source has translations in this run, so no cell can be tested"


def carry_text(table: pd.DataFrame) -> str:
    carried = table.loc[table["n_pairs_translation"] > 0]
    if carried.empty:
        return "No source has translated items in this run, so carry-over cannot be compared here."
    return "; ".join(f"{row.source}: slope {row.slope_translation:.2f} after translation against "
                     f"{row.slope_rewording:.2f} after rewording (same choice {row.same_choice_translation:.0%} "
                     f"against {row.same_choice_rewording:.0%})" for row in carried.itertuples()) + "."


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    # ("binary": the table's columns since it counts binary-reliable cells, so that an older stored copy is not read)
    table = study.computed("by_source", lambda: analyses.by_source(study.scores, study.options), "binary")
    out = Report()
    out.add_table("table", table, TABLE_STYLE)
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    out.figures["paper"] = paper.block(paper.source_rows(paper.read_json(folder, "review3_checks.json"), table),
                                       "review3_checks.json") if folder else None
    out.values.update({"sources_text": sources_text(table), "drop_text": drop_text(table),
                       "reliable_text": reliable_text(table), "carry_text": carry_text(table)})
    out.figures["drops"] = charts.forest(table, label="source", estimate="drop", low="drop_low", high="drop_high",
                                         title="Drop per source (95% bootstrap interval over items)")
    out.figures["carry_over"] = charts.paired_bars(
        table, label="source", columns={"slope_translation": "translation", "slope_rewording": "rewording"},
        x_title="carry-over slope", what="change", title="Carry-over slope per source")
    return out
