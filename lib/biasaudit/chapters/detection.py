"""Chapter 19: if a model really scored lower by a given amount, would the test call it reliable?"""

from __future__ import annotations

from biasaudit import charts
from biasaudit.params import RunParams
from biasaudit.report import Report, TableStyle
from biasaudit.study import Study

POWER_STYLE = TableStyle(columns={
    "delta": "injected shift δ", "n_cells": "cells", "n_runs": "runs", "detected": "detected",
    "detected_se": "standard error", "any_detected": "runs with a detection", "false_alarm": "false alarms"})


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    power = study.detection(list(params.deltas), params.n_runs)
    cells = study.cells()
    observed = (float(cells["drop"].abs().min()), float(cells["drop"].abs().max()))
    null = power.loc[power["delta"] == 0.0]
    caught = power.loc[power["detected"] >= 0.8, "delta"]
    median_drop = float(cells["drop"].abs().median())
    below = power.loc[power["delta"] <= median_drop]
    nan = float("nan")
    out = Report()
    out.add_table("power", power, POWER_STYLE)
    out.values.update({
        "false_alarm": float(null["detected"].iloc[0]) if len(null) else nan,
        "any_false_alarm": float(null["any_detected"].iloc[0]) if len(null) else nan,
        "delta_80_text": (f"δ = {caught.min():.3f}" if len(caught) else
                          f"none of the shifts tried (up to {max(params.deltas):.2f})"),
        "n_cells": int(power["n_cells"].iloc[0]) if len(power) else 0, "n_runs": params.n_runs,
        "band_low": observed[0], "band_high": observed[1], "median_drop": median_drop,
        "power_at_median": float(below["detected"].iloc[-1]) if len(below) else nan,
        "delta_at_median": float(below["delta"].iloc[-1]) if len(below) else nan, "alpha": params.alpha,
    })
    out.figures["curve"] = charts.detection_curve(power, observed=observed, alpha=params.alpha)
    return out
