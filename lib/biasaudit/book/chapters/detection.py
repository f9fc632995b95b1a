"""Chapter 19: if a model really scored lower by a given amount, would the test call it reliable?"""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts
from biasaudit.book.prose import count_noun, extremes
from biasaudit.book.report import Report, TableStyle, spoken_list
from biasaudit.data.release_files import release_file, resolve_released_source
from biasaudit.data.languages import language_label
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

POWER_STYLE = TableStyle(columns={
    "delta": "injected shift δ", "n_cells": "cells", "n_runs": "runs", "detected": "detected",
    "detected_se": "standard error", "any_detected": "runs with a detection", "false_alarm": "false alarms"})
LANGUAGE_STYLE = TableStyle(columns={
    "language": "language", "sd": "SD of the per-item changes", "observed": "observed |drop| (median over models)",
    "power_observed": "power at the observed drop (as in chapter 22)", "delta_80": "smallest δ caught ≥ 80% (curve)",
    "verdict": "verdict (chapter 22)"},
    formats={"power_observed": "{:.0%}", "language": language_label})


def language_summary(curves: pd.DataFrame, cells: pd.DataFrame, verdict_cells: pd.DataFrame) -> pd.DataFrame:
    """Per language: the scatter of its cells, its observed |drop| (median over models), the power at
    that drop, and the smallest shift of the curve caught in at least 80% of its cells.

    The power at the observed drop is chapter 22's (`analyses.verdict.cell_power`: each cell's test at
    its own drop, the other cells at their observed p-values), median over the language's models, as
    chapter 22's language table gives it; the curve lowers all of one language's cells together
    while the others stay at zero, so its value at the same δ need not be the same."""
    power = verdict_cells.groupby("language")["power"].median()
    rows = []
    for language, curve in curves.groupby("language", sort=True):
        observed = float(cells.loc[cells["language"] == language, "drop"].abs().median())
        caught = curve.loc[curve["detected"] >= 0.8, "delta"]
        rows.append({"language": language, "sd": float(curve["sd"].iloc[0]), "observed": observed,
                     "power_observed": float(power.get(language, float("nan"))),
                     "delta_80": float(caught.min()) if len(caught) else float("nan")})
    return pd.DataFrame(rows)


def power_clause(by_language: pd.DataFrame) -> str:
    """The per-language power at the observed drops, lowest and highest, as a clause ("the cell test's power
    ... runs from 12% in ... to 80% in ...") that a sentence can continue."""
    span = extremes(by_language.set_index("language")["power_observed"], lambda p: f"{p:.0%}")
    if not span:
        return "the run has no language cells, so there is no power to report"
    return (f"the cell test's power at each language's own scatter and observed drop (median over the models) "
            f"{'runs' if ' to ' in span else 'is'} {span}")


def power_text(by_language: pd.DataFrame) -> str:
    """`power_clause` as a sentence."""
    clause = power_clause(by_language)
    return clause[:1].upper() + clause[1:] + "."


def weak_text(by_language: pd.DataFrame) -> str:
    """What a low power means for the cell tests, and that the verdict does not rest on them."""
    weak = by_language.loc[by_language["power_observed"] < 0.8, "language"].tolist()
    verdict = (" The verdict does not rest on the cell tests: it holds each language's drop, with its interval, "
               "against the noise floors (its answer is the table's last column).")
    if weak:
        return (f"For {spoken_list([language_label(w) for w in weak])}, a drop the size of the observed one would be "
                "called reliable in fewer than 80% of the runs: a cell there that the test does not call reliable is not "
                "evidence that no shift of that size is there." + verdict)
    return ("For every language, a drop the size of the observed one would be called reliable in at least 80% of the "
            "runs: a cell the test does not call reliable is evidence that no shift that large is there in that "
            "model." + verdict)


def scatter_text(floor_sd: float, low: float, high: float) -> str:
    """How the rewording cells' scatter compares with the language cells' (SDs of per-item changes), and so
    what the pooled curve shows: said as it is, less, within or more."""
    span = f"SD {low:.3f} to {high:.3f}" if f"{low:.3f}" != f"{high:.3f}" else f"SD {low:.3f}"
    if floor_sd < low:
        return (f"scatter less (median SD {floor_sd:.3f}) than the language cells above ({span}), so it shows what "
                "the test can do on low scatter")
    if floor_sd > high:
        return (f"scatter more (median SD {floor_sd:.3f}) than the language cells above ({span}), so it understates "
                "what the test can do on a language's cells")
    return (f"scatter within the range of the language cells above (median SD {floor_sd:.3f}, against {span}), so "
            "it shows what the test can do on a middling scatter")


def _yes_no(value: object) -> str:
    return "yes" if bool(value) else "no"


SPIKE_RUNS = 400  # the paper's Figure 1 used 200 per δ; twice as many keep this run's Monte Carlo error small
SPIKE_STYLE = TableStyle(columns={
    "delta": "δ added to the log-odds (nats)", "shift": "shift, this run", "shift_released": "shift, released",
    "shift_agrees": "shift within 2 SE", "power": "power, this run", "power_released": "power, released",
    "power_agrees": "power within 2 SE", "power_book": "power, book's mechanism"},
    formats={"power": "{:.0%}", "power_released": "{:.0%}", "power_book": "{:.0%}", "shift_agrees": _yes_no,
             "power_agrees": _yes_no},
    decimals=3, empty="")


def spike_in_text(table: pd.DataFrame, n_models: int, n_cells: int, file: str = "spike_in_null_200.csv",
                  runs: int = 200) -> str:
    """What the paper's spike-in shows on this run, against the released curve."""
    parts = []
    for what in ("shift", "power"):
        off = [f"{d:g}" for d in table.loc[~table[f"{what}_agrees"].astype(bool), "delta"]]
        parts.append(f"the {what} is within two Monte Carlo standard errors of the released one at every δ" if not off
                     else f"the {what} differs from the released one by more than two Monte Carlo standard errors at "
                          f"δ = {spoken_list(off)}")
    superseded = (" That file is the paper's first, superseded curve (40 runs on the null cells of four models); "
                  "its Figure 1 rests on spike_in_null_200.csv (200 runs over the null cells of all ten), which "
                  "make released downloads." if file == "spike_in_null.csv" else "")
    return (f"On this run's {n_cells} null cells ({count_noun(n_models, 'model')} with rewordings), {parts[0]}, "
            f"and {parts[1]}. The released curve ({file}, {runs} runs per δ) is the paper's Figure 1. With other "
            "cells, Benjamini–Hochberg runs over another family and the cells' own scatter differs, so the power need "
            f"not match, while the shift, a property of the items' scores, should.{superseded}")


def spike_in(params: RunParams, study: Study) -> tuple[pd.DataFrame, str]:
    """The paper's spike-in on this run beside the released curve, when this run reads released scores."""
    if not params.released_scores:
        return pd.DataFrame(), ("This run reads no released scores, so the paper's spike-in is not run here, and there "
                                "is no table: the book's released part runs this page on the released scores when the "
                                "build has them.")
    folder = resolve_released_source(params.released_scores)
    path = release_file(folder, "spike_in_null_200.csv") or release_file(folder, "spike_in_null.csv")
    if path is None:
        return pd.DataFrame(), ("The released files at hand lack spike_in_null_200.csv, the paper's curve (its "
                                "Figure 1); make released downloads it.")
    paper = pd.read_csv(path)
    missing = {"delta", "shift", "power"} - set(paper.columns)
    if missing:
        return pd.DataFrame(), (f"{path.name} lacks {spoken_list(sorted(missing))}, columns of the paper's curve, so "
                                "it is not compared.")
    deltas = [float(d) for d in paper["delta"]]
    mine = study.computed("paper_spike_in", lambda: analyses.paper_spike_in(
        study.scores, study.options, deltas=deltas, n_runs=SPIKE_RUNS), deltas, SPIKE_RUNS)
    book = study.computed("detection", lambda: analyses.detection_power(
        study.scores, study.options, deltas=[float(x) for x in paper["shift"]], n_runs=SPIKE_RUNS, inject="one"),
        [float(x) for x in paper["shift"]], SPIKE_RUNS, "one")
    table = analyses.detection.spike_in_comparison(mine, paper, book)
    return table, spike_in_text(table, int(study.scores["model"].nunique()), int(mine["n_cells"].iloc[0]), path.name,
                                int(paper["runs"].iloc[0]) if "runs" in paper else 40)


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    power = study.detection(list(params.deltas), params.n_runs)
    curves = study.computed("language_detection", lambda: analyses.language_detection(
        study.scores, study.options, deltas=list(params.deltas), n_runs=params.n_runs),
        list(params.deltas), params.n_runs)
    cells = study.cells()
    verdict_cells = study.verdict_cells(pipeline.read_similarity(params), params.faithful_threshold, params.n_runs)
    observed = (float(cells["drop"].abs().min()), float(cells["drop"].abs().max()))
    null = power.loc[power["delta"] == 0.0]
    caught = power.loc[power["detected"] >= 0.8, "delta"]
    median_drop = float(cells["drop"].abs().median())
    below = power.loc[power["delta"] <= median_drop]
    by_language = language_summary(curves, cells, verdict_cells).merge(
        study.language_verdicts()[["language", "verdict"]], on="language", how="left")
    floor_sd = float(analyses.floor_cells(study.scores, study.options)["sd"].median()) if len(power) else float("nan")
    nan = float("nan")
    out = Report()
    out.add_table("power", power, POWER_STYLE)
    out.add_table("languages", by_language, LANGUAGE_STYLE)
    out.values.update({
        "false_alarm": float(null["detected"].iloc[0]) if len(null) else nan,
        "any_false_alarm": float(null["any_detected"].iloc[0]) if len(null) else nan,
        "delta_80_text": (f"δ = {caught.min():.3f}" if len(caught) else
                          f"none of the shifts tried (up to {max(params.deltas):.2f})"),
        "n_cells": int(power["n_cells"].iloc[0]) if len(power) else 0, "n_runs": params.n_runs,
        "band_low": observed[0], "band_high": observed[1], "median_drop": median_drop,
        "power_at_median": float(below["detected"].iloc[-1]) if len(below) else nan,
        "delta_at_median": float(below["delta"].iloc[-1]) if len(below) else nan, "alpha": params.alpha,
        "floor_sd": floor_sd, "language_sd_low": float(by_language["sd"].min()),
        "language_sd_high": float(by_language["sd"].max()),
        "scatter_text": scatter_text(floor_sd, float(by_language["sd"].min()), float(by_language["sd"].max())),
        "weak_text": weak_text(by_language), "power_text": power_text(by_language),
        "power_clause": power_clause(by_language),
    })
    spike, out.values["spike_in_text"] = spike_in(params, study)
    out.values["spike_n_runs"] = SPIKE_RUNS
    out.add_table("spike_in", spike, SPIKE_STYLE)
    out.figures["curve"] = charts.detection_curve(power, observed=observed, alpha=params.alpha)
    out.figures["languages"] = charts.language_curves(curves, by_language)
    return out
