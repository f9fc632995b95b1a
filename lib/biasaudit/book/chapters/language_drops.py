"""Chapter 10: when a model scores lower in another language than in English, is it a real shift?"""

from __future__ import annotations

from dataclasses import replace

import altair as alt

from biasaudit.book import charts, explore, paper
from biasaudit.book.prose import refined_text, run_scope
from biasaudit.book.report import Report, TableStyle, interval_column
from biasaudit.lm.registry import OFFLINE_MODELS
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

DROPS_STYLE = TableStyle(columns={
    "language": "language", "n_items": "items", "n_models": "models", "soft": "soft score", "binary": "binary score",
    "drop": "drop (English − language)", "interval": "95% interval",
    "reliable_drops": "models with a reliable drop", "verdict": "verdict (chapter 22)", "slope": "carry-over slope",
    "same_choice": "same choice", "fluency": "fluency"}, formats={"drop": "{:.4f}"})
CELLS_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "n": "items", "drop": "drop (English − language)", "p": "p", "q": "q",
    "reliable": "reliable", "drop_binary": "drop (binary)", "q_binary": "q (binary)", "sd": "SD of the changes",
    "noise_only": "noise only"}, decimals=4)


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    drops = study.language_drops().merge(study.language_verdicts()[["language", "verdict"]], on="language", how="left")
    cells = study.cells()
    others = drops.loc[drops["language"] != "en"]
    english = drops.loc[drops["language"] == "en"].iloc[0]
    out = Report()
    bases = sorted({b for b in drops["basis"] if b})
    # the drop and its interval at four decimals, as chapters 16 and 22 show the same numbers
    out.add_table("drops", drops.assign(interval=interval_column(drops["drop_low"], drops["drop_high"], 4)),
                  replace(DROPS_STYLE, caption=f"The intervals are {' or '.join(bases)} (the verdict's, chapter 22)."
                          if bases else ""))
    out.add_table("cells", cells, CELLS_STYLE)
    out.values.update({
        "n_models": int(english["n_models"]), "n_items": int(english["n_items"]),
        "english_soft": float(english["soft"]), "n_languages": len(others),
        "n_lower": int((others["drop"] > 0).sum()), "mean_drop": float(others["drop"].mean()),
        "n_cells": len(cells), "alpha": params.alpha,
        "n_reliable": int((cells["reliable"] & (cells["drop"] > 0)).sum()),
        "n_reliable_rise": int((cells["reliable"] & (cells["drop"] < 0)).sum()),
        "n_reliable_binary": int((cells["reliable_binary"] & (cells["drop_binary"] > 0)).sum()),
        "mean_slope": float(others["slope"].mean()), "mean_same_choice": float(others["same_choice"].mean()),
        "refined_text": refined_text(cells, params.n_permutations, params.alpha),
        "scope_text": run_scope(released=bool(params.released_scores), models=sorted(study.scores["model"].unique()),
                                offline=list(OFFLINE_MODELS)),
    })
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    out.figures["paper"] = paper.block(paper.drops_rows(paper.read_json(folder, "paper_numbers.json"), drops, cells,
                                                        params.n_permutations), "paper_numbers.json") if folder else None
    out.figures["drops"] = charts.drop_bars(drops)
    moved = explore.moved_items(study.scores, params.aggregate)
    out.figures["heatmap"] = explore.cell_explorer(
        cells, moved,
        tooltip=[alt.Tooltip("drop:Q", format=".3f"), alt.Tooltip("q:Q", format=".3f"),
                 alt.Tooltip("p:Q", format=".4f"), alt.Tooltip("reliable:N"), alt.Tooltip("n:Q", title="items"),
                 alt.Tooltip("sd:Q", title="SD of the changes", format=".3f")],
        title="Drop by model and language")
    return out
