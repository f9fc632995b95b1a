"""Would the test catch a shift of known size? Injected shifts on rewording cells (chapter 19)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import expit, logit

from biasaudit.analyses import stats
from biasaudit.analyses.scores import (
    english_rewording_pairs,
    item_scores,
    paired_with_english,
)
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions


def null_pvalues(cells: list, shifts: np.ndarray, n_runs: int, options: StudyOptions, label: str,
                 center: bool = False) -> np.ndarray:
    """(cells × runs × shifts) sign-flip p-values of each cell's per-item changes after fresh random
    signs in every run (a true shift of zero with the cell's own spread), lowered by each shift.

    `cells` are (key, changes) pairs; `center` removes a cell's mean change first, so that a real
    shift in the data does not widen its spread. Each cell has its own generator, seeded by
    (seed, label, key), shared by its runs and shifts."""
    p = np.empty((len(cells), n_runs, shifts.size))
    for k, (key, series) in enumerate(cells):
        d = np.sort(np.asarray(series, dtype=float))
        if center:
            d = np.sort(d - d.mean())
        key = key if isinstance(key, tuple) else (key,)
        rng = np.random.default_rng([options.seed, stats.group_seed_key((label, *key))])
        data_signs = np.where(rng.random((d.size, n_runs)) < 0.5, -1.0, 1.0)
        p[k] = stats.sign_flip_pvalues_shifted(d[:, None] * data_signs, shifts, n_permutations=options.n_permutations,
                                               rng=rng)
    return p


def language_detection(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    deltas: list[float] | tuple[float, ...] = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10),
    n_runs: int = 100,
) -> pd.DataFrame:
    """Power at the scatter of the language cells themselves: would the test catch a drop of δ in
    one language?

    The cells are chapter 10's model × language cells of translations. Each cell's per-item changes
    are centred (its observed mean removed) and get fresh random signs in every run, so the true
    shift is zero while the cell's own scatter is kept; then the cells of one language are lowered
    by δ, the others left at zero, and every cell is tested with Benjamini–Hochberg over all model ×
    language cells, as in chapter 10. One row per language × δ: language, delta, n_cells (the
    language's cells), n_runs, detected (share of the language's cells called reliable), sd (mean
    over the language's cells of the SD of the per-item changes).
    """
    deltas = [float(d) for d in deltas]
    shifts = np.array(sorted(set(deltas) | {0.0}))
    zero = int(np.flatnonzero(shifts == 0.0)[0])
    pairs = paired_with_english(item_scores(scores, options.aggregate), "translation").dropna(subset=["change"])
    cells = list(pairs.groupby(["model", "language"], sort=True)["change"])
    columns = ["language", "delta", "n_cells", "n_runs", "detected", "sd"]
    if not cells:
        return pd.DataFrame(columns=columns)
    p = null_pvalues(cells, shifts, n_runs, options, "language detection", center=True)
    languages = np.array([key[1] for key, _ in cells])
    rows = []
    for language in sorted(set(languages)):
        mine = languages == language
        sd = float(np.mean([series.std(ddof=1) for (key, series) in cells if key[1] == language]))
        for delta in deltas:
            used = p[:, :, zero].copy()
            used[mine] = p[mine, :, int(np.flatnonzero(shifts == delta)[0])]
            hits = sps.false_discovery_control(used, axis=0, method="bh")[mine] < options.alpha
            rows.append({"language": language, "delta": delta, "n_cells": int(mine.sum()), "n_runs": n_runs,
                         "detected": float(hits.mean()), "sd": sd})
    return pd.DataFrame(rows, columns=columns)


def detection_power(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    deltas: list[float] | tuple[float, ...] = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10),
    n_runs: int = 100,
    inject: Literal["all", "one"] = "all",
) -> pd.DataFrame:
    """Would the test catch a shift of known size? Share of cells detected per injected shift δ.

    The cells are the model × route cells of English rewordings against their originals, where
    the true shift is zero. In each seeded run every cell's per-item changes get fresh random
    signs (so the run's true shift is exactly zero while the real spread of rewording changes is
    kept); then the reworded soft scores are lowered by δ (changes minus δ; scores are not
    clipped, which would bias the shift), every cell is tested with the sign-flip test, and
    Benjamini–Hochberg runs over all cells, exactly as for real language drops. With
    `inject="all"` every cell is shifted; with `"one"` one cell per run, drawn at random, as in the
    paper's spike-in, and the others stay null.

    Returns one row per δ: delta, n_cells, n_runs, detected (share of shifted cells called
    reliable with q < alpha: at δ = 0 this is the false-alarm rate), detected_se (its binomial
    standard error over runs × cells, ignoring the dependence between cells), any_detected (share
    of runs with at least one reliable cell) and false_alarm (share of unshifted cells called
    reliable: all cells at δ = 0, the other cells with `inject="one"`; NaN otherwise).
    Each cell draws its test signs from its own generator seeded by (seed, cell), shared by all its
    runs and shifts, so a rerun gives the same curve.
    """
    if inject not in ("all", "one"):
        raise ValueError(f"inject must be 'all' or 'one', not {inject!r}")
    if n_runs < 1:
        raise ValueError(f"n_runs must be at least 1, got {n_runs}")
    deltas = [float(d) for d in deltas]
    shifts = np.array(sorted(set(deltas) | {0.0}))
    zero = int(np.flatnonzero(shifts == 0.0)[0])
    pairs = english_rewording_pairs(item_scores(scores, options.aggregate)).dropna(subset=["change"])
    cells = list(pairs.groupby(["model", "via"], sort=True)["change"])
    columns = ["delta", "n_cells", "n_runs", "detected", "detected_se", "any_detected", "false_alarm"]
    if not cells:
        return pd.DataFrame(columns=columns)
    p = null_pvalues(cells, shifts, n_runs, options, "detection")
    chooser = np.random.default_rng([options.seed, stats.group_seed_key(("detection", "chosen cells"))])
    chosen = chooser.integers(0, len(cells), size=n_runs)
    rows = []
    for delta in deltas:
        g = int(np.flatnonzero(shifts == delta)[0])
        if inject == "all":
            q = sps.false_discovery_control(p[:, :, g], axis=0, method="bh")
            hits = q < options.alpha  # (cells × runs)
            detected, n_tests = hits.mean(), hits.size
            any_detected = hits.any(axis=0).mean()
            false_alarm = detected if delta == 0.0 else np.nan
        else:
            used = p[:, :, zero].copy()
            used[chosen, np.arange(n_runs)] = p[chosen, np.arange(n_runs), g]
            q = sps.false_discovery_control(used, axis=0, method="bh")
            hits = q < options.alpha
            shifted = hits[chosen, np.arange(n_runs)]
            detected, n_tests = shifted.mean(), shifted.size
            any_detected = hits.any(axis=0).mean()
            others = np.ones_like(hits, dtype=bool)
            others[chosen, np.arange(n_runs)] = False
            false_alarm = hits[others].mean() if len(cells) > 1 else np.nan
        rows.append({"delta": delta, "n_cells": len(cells), "n_runs": n_runs, "detected": float(detected),
                     "detected_se": float(np.sqrt(detected * (1 - detected) / n_tests)),
                     "any_detected": float(any_detected), "false_alarm": float(false_alarm)})
    return pd.DataFrame(rows, columns=columns)




def paper_spike_in(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    deltas: list[float] | tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5),
    n_runs: int = 40,
) -> pd.DataFrame:
    """The paper's spike-in (its Figure 1), as its released description gives it.

    The null cells are the model × route cells of English rewordings against their originals, as
    observed (no fresh signs). In each run one cell is drawn at random and `delta` nats are added to
    the log-odds of its reworded versions (log p(stereotyped) − log p(anti-stereotyped), per-token
    means), the soft score recomputed through the sigmoid, so the shift differs from item to item;
    that cell is retested with the sign-flip test and Benjamini–Hochberg runs over all null cells,
    the others keeping their observed p-values. One row per δ: delta, n_cells, n_runs, shift (mean
    over runs of the spiked cell's mean soft shift) and shift_se (its Monte Carlo standard error over
    runs), power (share of runs whose spiked cell is called reliable), power_se (its binomial standard
    error), false_pos (share of the other cells called
    reliable, over runs). The book's own mechanism is `detection_power`.
    """
    if n_runs < 1:
        raise ValueError(f"n_runs must be at least 1, got {n_runs}")
    scored = item_scores(scores, options.aggregate)
    pairs = english_rewording_pairs(scored).dropna(subset=["change"])
    columns = ["delta", "n_cells", "n_runs", "shift", "shift_se", "power", "power_se", "false_pos"]
    cells = [(key, group) for key, group in pairs.groupby(["model", "via"], sort=True)]
    if not cells:
        return pd.DataFrame(columns=columns)

    def pvalue(changes: np.ndarray, key: tuple) -> float:
        rng = np.random.default_rng([options.seed, stats.group_seed_key(key)])
        return stats.sign_flip_pvalue(changes, n_permutations=options.n_permutations, rng=rng)

    observed = np.array([pvalue(g["change"].to_numpy(dtype=float), ("paper spike-in", *k)) for k, g in cells])
    chooser = np.random.default_rng([options.seed, stats.group_seed_key(("paper spike-in", "chosen cells"))])
    chosen = chooser.integers(0, len(cells), size=n_runs)
    rows = []
    for delta in (float(d) for d in deltas):
        shifts, hits, false = [], [], []
        for run, k in enumerate(chosen):
            key, group = cells[k]
            soft_en, soft = group["soft_en"].to_numpy(dtype=float), group["soft"].to_numpy(dtype=float)
            spiked = expit(logit(soft) + delta)
            shifts.append(float(np.mean(spiked - soft)))
            p = observed.copy()
            p[k] = pvalue(spiked - soft_en, ("paper spike-in", *key, run, delta))
            reliable = sps.false_discovery_control(p, method="bh") < options.alpha
            hits.append(bool(reliable[k]))
            false.append(float(np.delete(reliable, k).mean()) if len(cells) > 1 else np.nan)
        power = float(np.mean(hits))
        rows.append({"delta": delta, "n_cells": len(cells), "n_runs": n_runs, "shift": float(np.mean(shifts)),
                     "shift_se": float(np.std(shifts, ddof=1) / np.sqrt(n_runs)) if n_runs > 1 else np.nan,
                     "power": power, "power_se": float(np.sqrt(power * (1 - power) / n_runs)),
                     "false_pos": float(np.mean(false))})
    return pd.DataFrame(rows, columns=columns)


def spike_in_comparison(mine: pd.DataFrame, released: pd.DataFrame, book: pd.DataFrame) -> pd.DataFrame:
    """The paper's spike-in three ways, per δ (nats): this run's `paper_spike_in` (shift, power), the
    released curve (`spike_in_null_200.csv`, or the superseded `spike_in_null.csv`: shift, power, and runs
    where the file says) and the book's own mechanism at the same soft shift (`detection_power` with
    `inject="one"`, its deltas the released shifts, in the same order). `shift_agrees` and `power_agrees`
    say whether this run's shift and power are within two Monte Carlo standard errors of the released
    ones (the released curve's own error from its runs, 40 where the file does not say; the shift's from
    this run's spread of per-run shifts)."""
    table = mine.merge(released[["delta", "shift", "power"]], on="delta", suffixes=("", "_released"))
    runs_released = table["delta"].map(released.set_index("delta")["runs"]).to_numpy(dtype=float) \
        if "runs" in released else 40
    power_se = np.sqrt(table["power_se"] ** 2
                       + table["power_released"] * (1 - table["power_released"]) / runs_released)
    shift_se = table["shift_se"] * np.sqrt(1 + table["n_runs"] / runs_released)
    table["shift_agrees"] = (table["shift"] - table["shift_released"]).abs() <= 2 * shift_se
    table["power_agrees"] = (table["power"] - table["power_released"]).abs() <= 2 * power_se
    table["power_book"] = book["detected"].to_numpy()[:len(table)] if len(book) >= len(table) else np.nan
    return table[["delta", "shift", "shift_released", "shift_agrees", "power", "power_released", "power_agrees",
                  "power_book"]]
