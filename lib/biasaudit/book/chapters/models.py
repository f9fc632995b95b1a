"""Chapter 12: for each model, do its scores move more between languages than under rewording?"""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts, paper
from biasaudit.book.report import Report, TableStyle, interval_column
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

# Items and languages per model are in the prose; "interval above zero" is read off the interval.
GAPS_STYLE = TableStyle(columns={
    "model": "model", "english_soft": "English soft", "english_binary": "English binary", "gap": "gap",
    "floor": "floor", "gap_minus_floor": "gap − floor", "interval": "95% interval", "reliable_drops": "reliable drops",
    "reliable_drops_binary": "reliable (binary)", "clci": "CLCI"}, decimals=4)


def above_noise(cells: pd.DataFrame, times: float = 2.0) -> int:
    """Cells whose |drop| exceeds `times` their model's noise-only value as the drop table shows it (the
    mean over the model's languages, `analyses.model_drop_table`), so a reader can count them there."""
    shown = cells["model"].map(cells.groupby("model")["noise_only"].mean())
    return int((cells["drop"].abs() > times * shown).sum())


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    gaps = study.gaps()
    cells = study.cells()
    out = Report()
    out.add_table("gaps", gaps.assign(interval=interval_column(gaps["low"], gaps["high"], 4)), GAPS_STYLE)
    table = analyses.model_drop_table(cells).reset_index()
    out.add_table("drop_table", table)
    widest, narrowest = gaps.loc[gaps["gap"].idxmax()], gaps.loc[gaps["gap"].idxmin()]
    out.values.update({
        "n_models": len(gaps), "n_items": int(gaps["n_items"].max()), "n_languages": int(gaps["n_languages"].max()),
        "mean_gap": float(gaps["gap"].mean()), "mean_floor": float(gaps["floor"].mean()),
        "range_text": (f"The gap ranges from {narrowest['gap']:.4f} ({narrowest['model']}) to {widest['gap']:.4f} "
                       f"({widest['model']}), so CLCI ranges from {gaps['clci'].min():.3f} to "
                       f"{gaps['clci'].max():.3f}." if len(gaps) > 1 else
                       f"With one model, {widest['model']}, CLCI is {widest['clci']:.3f}."),
        "n_above_floor": int(gaps["above_floor"].sum()), "n_cells": len(cells),
        "n_reliable": int(gaps["reliable_drops"].sum()), "n_reliable_binary": int(gaps["reliable_drops_binary"].sum()),
        "n_above_noise": above_noise(cells),
    })
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    out.figures["paper"] = paper.block(paper.gap_rows(
        paper.read_json(folder, "paper_numbers.json"), paper.read_csv(folder, "bootstrap_dfg_minus_floor.csv"), gaps,
        params.n_bootstrap), "paper_numbers.json, bootstrap_dfg_minus_floor.csv") if folder else None
    out.figures["gaps"] = charts.gap_minus_floor(gaps)
    out.figures["heatmap"] = charts.drop_heatmap(cells)
    return out
