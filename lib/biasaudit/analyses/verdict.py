"""One verdict per model × language, and per language, from the evidence of the earlier chapters
(chapter 22).

The rule (`cell_verdict`), for a drop (English − language; positive: the language looks less biased):

1. **within noise** when |drop| is no larger than the model's noise floor (chapter 11): rewording
   English alone moves this model's scores as much, so the language cannot be blamed for it;
2. otherwise **real shift** when the item-by-item test calls the drop reliable (chapter 10:
   sign-flip test, Benjamini–Hochberg over every model × language cell, q < alpha);
3. otherwise **too little power to tell** when the test, at this cell's own scatter and number of
   items, would catch a drop of this size less than `min_power` of the time (`cell_power`): a real
   shift this large could hide behind this much noise;
4. otherwise **within noise**: a drop this large would usually have been caught, and was not.

A language's verdict (`language_verdict`): cells with too little power abstain. When the cells
that do vote agree, their verdict is the language's. When none votes, or some call a real shift and
others, with enough power, call the drop within noise, a test that pools the models decides: the
language's drop (each item's drop averaged over models, then over items) with its bootstrap interval
over items, against the noise floor (the median of the models' floors). An interval wholly beyond
the floor is a real shift; one wholly within ±floor is within noise; otherwise, with no vote it is
"too little power to tell", and with opposed votes "models disagree".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from biasaudit.analyses import stats
from biasaudit.analyses.carry_over import carry_point
from biasaudit.analyses.detection import null_pvalues
from biasaudit.analyses.scores import item_scores, paired_with_english
from biasaudit.run.options import DEFAULT_OPTIONS, StudyOptions

REAL, NOISE, UNDERPOWERED, DISAGREE = "real shift", "within noise", "too little power to tell", "models disagree"
VERDICTS: tuple[str, ...] = (REAL, NOISE, UNDERPOWERED)
MIN_POWER: float = 0.8


def cell_verdict(*, drop: float, reliable: bool, floor: float, power: float, min_power: float = MIN_POWER) -> str:
    """The rule of the module docstring, for one model × language cell."""
    if np.isnan(drop):
        raise ValueError("a cell without a drop has no verdict")
    if not np.isnan(floor) and abs(drop) <= floor:
        return NOISE
    if reliable:
        return REAL
    if np.isnan(power) or power < min_power:
        return UNDERPOWERED
    return NOISE


def pooled_verdict(low: float, high: float, floor: float) -> str | None:
    """The pooled test: the language's drop interval against ±floor; None when it decides nothing."""
    if np.isnan(low) or np.isnan(high) or np.isnan(floor):
        return None
    if low > floor or high < -floor:
        return REAL
    if -floor <= low and high <= floor:
        return NOISE
    return None


def language_verdict(cell_verdicts: list[str], *, low: float = np.nan, high: float = np.nan,
                     floor: float = np.nan) -> tuple[str, str]:
    """(verdict, what decided it: "cells" or "pooled drop"), by the rule of the module docstring;
    `low`, `high` are the language's pooled drop interval and `floor` its noise floor."""
    if not cell_verdicts:
        raise ValueError("a language without cells has no verdict")
    votes = {verdict for verdict in cell_verdicts if verdict != UNDERPOWERED}
    if len(votes) == 1:
        return votes.pop(), "cells"
    pooled = pooled_verdict(low, high, floor)
    if pooled is not None:
        return pooled, "pooled drop"
    return (DISAGREE if votes else UNDERPOWERED), "cells"


def cell_power(changes: np.ndarray, shift: float, other_p: np.ndarray, options: StudyOptions, *, n_runs: int,
               key: tuple) -> float:
    """Share of seeded runs in which a drop of `shift` is called reliable at this cell's own scatter.

    The cell's per-item changes are centred, get fresh random signs (true shift zero, own spread
    kept) and are lowered by `shift`; each run's p-value joins the other cells' observed p-values
    (`other_p`) in Benjamini–Hochberg, as the real test does, and counts when its q < alpha."""
    p = null_pvalues([(key, changes)], np.array([abs(shift)]), n_runs, options, "verdict power", center=True)[0, :, 0]
    family = np.column_stack([p, np.broadcast_to(other_p, (n_runs, other_p.size))])
    q = sps.false_discovery_control(family, axis=1, method="bh")[:, 0]
    return float((q < options.alpha).mean())


def verdict_cells(scores: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS, *, cells: pd.DataFrame,
                  floors: pd.DataFrame, similarity: pd.DataFrame | None = None, threshold: float = 0.9,
                  n_runs: int = 200, min_power: float = MIN_POWER) -> pd.DataFrame:
    """The evidence and verdict of every model × language cell.

    `cells` and `floors` are the run's `cell_tests` and `floor_cells`. Columns: model, language, n,
    drop with a percentile bootstrap interval over items (low, high), q, reliable, floor (the
    model's: median over its routes of |English − reworded|), above_floor, drop_faithful (the drop
    on faithful translations only, with `similarity`), slope (carry-over of this model and language),
    power (of the test at this cell's scatter, for a drop of this size), verdict.
    """
    pairs = paired_with_english(item_scores(scores, options.aggregate), "translation").dropna(subset=["change"])
    model_floor = floors.groupby("model")["floor"].median()
    if similarity is not None:
        judged = similarity.groupby("item_id")["similarity"].mean()
        pairs = pairs.assign(faithful=pairs["item_id"].map(judged).ge(threshold))
    rows = []
    for (model, language), group in pairs.groupby(["model", "language"], sort=True):
        cell = cells.loc[(cells["model"] == model) & (cells["language"] == language)].iloc[0]
        others = cells.loc[~((cells["model"] == model) & (cells["language"] == language)), "p"].to_numpy(dtype=float)
        drops = -group["change"].to_numpy(dtype=float)
        drop, low, high = stats.bootstrap_mean_ci(drops, n_boot=options.n_bootstrap, level=options.level,
                                                  seed=[options.seed, stats.group_seed_key(("verdict", model, language))])
        floor = float(model_floor.get(model, np.nan))
        power = cell_power(group["change"].to_numpy(dtype=float), drop, others[~np.isnan(others)], options,
                           n_runs=n_runs, key=(model, language))
        faithful = group.loc[group["faithful"]] if similarity is not None else group.iloc[0:0]
        rows.append({
            "model": model, "language": language, "n": len(group), "drop": drop, "low": low, "high": high,
            "q": float(cell["q"]), "reliable": bool(cell["reliable"]), "floor": floor,
            "above_floor": bool(abs(drop) > floor) if not np.isnan(floor) else np.nan,
            "drop_faithful": float(-faithful["change"].mean()) if len(faithful) else np.nan,
            "slope": carry_point(group)["slope"], "power": power,
            "verdict": cell_verdict(drop=drop, reliable=bool(cell["reliable"]), floor=floor, power=power,
                                    min_power=min_power),
        })
    return pd.DataFrame(rows)


def verdict_languages(table: pd.DataFrame, scores: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """One row per language: models, the drop averaged over models with a bootstrap interval over
    items (each item's drop averaged over models first), reliable models, the models' floors, the
    faithful-only drop, the carry-over slope (pooled within models), power (median over models), how
    many models reach each verdict, the language's verdict (`language_verdict`) and what decided it."""
    pairs = paired_with_english(item_scores(scores, options.aggregate), "translation").dropna(subset=["change"])
    rows = []
    for language, mine in table.groupby("language", sort=True):
        per_item = -pairs.loc[pairs["language"] == language].groupby("base_id")["change"].mean()
        drop, low, high = stats.bootstrap_mean_ci(per_item.to_numpy(), n_boot=options.n_bootstrap, level=options.level,
                                                  seed=[options.seed, stats.group_seed_key(("verdict", language))])
        counts = mine["verdict"].value_counts()
        floor = float(mine["floor"].median())
        verdict, decided_by = language_verdict(list(mine["verdict"]), low=low, high=high, floor=floor)
        rows.append({
            "language": language, "n_models": len(mine), "drop": drop, "low": low, "high": high,
            "reliable_models": int(mine["reliable"].sum()), "floor": floor,
            "drop_faithful": float(mine["drop_faithful"].mean()),
            "slope": carry_point(pairs.loc[pairs["language"] == language])["slope"],
            "power": float(mine["power"].median()),
            **{f"n_{v.replace(' ', '_')}": int(counts.get(v, 0)) for v in VERDICTS},
            "verdict": verdict, "decided_by": decided_by,
        })
    return pd.DataFrame(rows)
