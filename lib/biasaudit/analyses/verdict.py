"""The book's one answer per language (chapter 22): is its lower score a real shift, or no more than
rewording English produces anyway?

The language verdict (`language_verdict`) holds the language's mean drop (English − language), with
its 95% interval, against the noise floors of the run's models (a model's floor: the mean over its
rewording routes of |English − reworded English|, `floor.model_floors`):

- **real shift**: the interval lies wholly beyond the largest model floor (on either side of zero):
  no model's rewording moved its scores that far;
- **within noise**: the interval lies wholly inside ± the largest floor: rewording English moved some
  model's scores as far;
- **beyond the typical floor, not clearly**: the interval lies wholly beyond the typical (median)
  model floor, but reaches inside the largest one;
- **too little evidence**: the interval reaches inside the typical floor and beyond the largest one.

Why the largest floor and not the typical one: "clearly more than rewording produces" has to hold
against every model's rewording, not against a middle one that half the models exceed; and why an
interval and not the mean: the mean alone cannot tell a wide interval from a narrow one.

The interval (`language_interval`) is across models (Student t, the models as units, as chapter 10
gives it) when the run has at least `MIN_MODELS` models, so the verdict speaks for models like these;
with fewer, a t interval over two or three models is too wide to decide anything, and the interval is
a percentile bootstrap over base items of each item's drop averaged over the models: it speaks for
these models only, and the page says which.

The model × language cells are the evidence per model shown beside the verdict, not votes: each with
its drop and interval over items, chapter 10's q, its model's floor, and the power of chapter 10's test
at the cell's own scatter for a drop of its size (`cell_power`). `cell_evidence` names what a cell
shows in words.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from biasaudit.analyses import stats
from biasaudit.analyses.carry_over import carry_point
from biasaudit.analyses.detection import null_pvalues
from biasaudit.analyses.floor import model_floors
from biasaudit.analyses.intervals import ACROSS_MODELS, MIN_MODELS, OVER_ITEMS, interval_basis, language_interval
from biasaudit.analyses.scores import item_scores, paired_with_english
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions

REAL, BEYOND_TYPICAL, UNCLEAR, NOISE = ("real shift", "beyond the typical floor, not clearly", "too little evidence",
                                        "within noise")
NO_FLOOR = "no noise floor"
BOUNDARY = "at the boundary"
# In the order the page lists them: strongest evidence of a shift first.
VERDICTS: tuple[str, ...] = (REAL, BEYOND_TYPICAL, UNCLEAR, NOISE, BOUNDARY)
MIN_POWER: float = 0.8

# What each cell shows (`cell_evidence`); evidence per model, not a verdict.
WITHIN_FLOOR, RELIABLE, NOT_RELIABLE, LOW_POWER = (
    "within its model's floor", "beyond its floor, reliable", "beyond its floor, not reliable",
    "beyond its floor, not reliable, low power")
EVIDENCE: tuple[str, ...] = (RELIABLE, LOW_POWER, NOT_RELIABLE, WITHIN_FLOOR)


def language_verdict(low: float, high: float, *, largest_floor: float, typical_floor: float) -> str:
    """The rule of the module docstring: the interval [low, high] against ± the floors."""
    if np.isnan(largest_floor) or np.isnan(typical_floor):
        return NO_FLOOR
    if typical_floor > largest_floor:
        raise ValueError(f"the typical floor ({typical_floor}) cannot exceed the largest ({largest_floor})")
    if np.isnan(low) or np.isnan(high):
        return UNCLEAR
    if low > high:
        raise ValueError(f"an interval's low end ({low}) is above its high end ({high})")
    if low > largest_floor or high < -largest_floor:
        return REAL
    if -largest_floor <= low and high <= largest_floor:
        return NOISE
    if low > typical_floor or high < -typical_floor:
        return BEYOND_TYPICAL
    return UNCLEAR


def settled_verdict(low: float, high: float, *, largest_floor: float, typical_floor: float, low_se: float = 0.0,
                    high_se: float = 0.0) -> tuple[str, list[str]]:
    """(verdict, the verdicts the interval's Monte Carlo error allows): the rule's verdict where moving each
    end by two of its standard errors either way cannot change it; else `BOUNDARY`, with the verdicts the
    draws could have given. A t interval has no such error (0), so its verdict always stands."""
    margins = [2 * (0.0 if np.isnan(low_se) else low_se), 2 * (0.0 if np.isnan(high_se) else high_se)]
    possible = sorted({language_verdict(min(a, b), max(a, b), largest_floor=largest_floor, typical_floor=typical_floor)
                       for a in (low - margins[0], low, low + margins[0])
                       for b in (high - margins[1], high, high + margins[1])},
                      key=lambda v: VERDICTS.index(v) if v in VERDICTS else len(VERDICTS))
    if len(possible) == 1:
        return possible[0], possible
    return BOUNDARY, possible


def verdict_reason(verdict: str, low: float, high: float, *, largest_floor: float, typical_floor: float,
                   possible: list[str] | None = None) -> str:
    """The condition that gave `verdict`, with this language's numbers, for the verdict table."""
    interval = f"[{low:.4f}, {high:.4f}]"
    if verdict == REAL:
        return f"{interval} lies beyond every model's floor (largest {largest_floor:.4f})"
    if verdict == NOISE:
        return f"{interval} lies inside ± the largest floor ({largest_floor:.4f})"
    if verdict == BEYOND_TYPICAL:
        return (f"{interval} lies beyond the typical floor ({typical_floor:.4f}) but reaches inside the largest "
                f"({largest_floor:.4f})")
    if verdict == UNCLEAR:
        if np.isnan(low) or np.isnan(high):
            return "no interval: too few items or models"
        return (f"{interval} reaches inside the typical floor ({typical_floor:.4f}) and beyond the largest "
                f"({largest_floor:.4f})")
    if verdict == NO_FLOOR:
        return "the run has no English rewordings, so no floor to compare with"
    if verdict == BOUNDARY:
        return (f"{interval} has an end within two Monte Carlo standard errors of a floor (typical "
                f"{typical_floor:.4f}, largest {largest_floor:.4f}): other draws could give "
                f"{' or '.join(possible or [])}")
    raise ValueError(f"{verdict!r} is not a verdict")


def cell_evidence(*, drop: float, reliable: bool, floor: float, power: float, min_power: float = MIN_POWER) -> str:
    """What one model × language cell shows: within its model's floor, or beyond it and then reliable
    (chapter 10's test) or not, and if not, whether the test had the power to see a drop this large."""
    if np.isnan(drop):
        raise ValueError("a cell without a drop shows nothing")
    if not np.isnan(floor) and abs(drop) <= floor:
        return WITHIN_FLOOR
    if reliable:
        return RELIABLE
    if np.isnan(power) or power < min_power:
        return LOW_POWER
    return NOT_RELIABLE


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
    """The evidence of every model × language cell.

    `cells` and `floors` are the run's `cell_tests` and `floor_cells`. Columns: model, language, n,
    drop with a percentile bootstrap interval over items (low, high), q, reliable, floor (the
    model's: `floor.model_floors`), above_floor, drop_faithful (the drop on faithful translations
    only, with `similarity`), slope (carry-over of this model and language), power (of the test at this
    cell's scatter, for a drop of this size), evidence (`cell_evidence`).
    """
    pairs = paired_with_english(item_scores(scores, options.aggregate), "translation").dropna(subset=["change"])
    model_floor = model_floors(floors)
    if similarity is not None:
        judged = similarity.groupby("item_id")["similarity"].mean()
        pairs = pairs.assign(faithful=pairs["item_id"].map(judged).ge(threshold))
    rows = []
    for (model, language), group in pairs.groupby(["model", "language"], sort=True):
        mine = (cells["model"] == model) & (cells["language"] == language)
        cell = cells.loc[mine].iloc[0]
        others = cells.loc[~mine, "p"].to_numpy(dtype=float)
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
            "evidence": cell_evidence(drop=drop, reliable=bool(cell["reliable"]), floor=floor, power=power,
                                      min_power=min_power),
        })
    return pd.DataFrame(rows)


def verdict_languages(scores: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS, *, cells: pd.DataFrame,
                      floors: pd.DataFrame, min_models: int = MIN_MODELS,
                      drops: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per language: n_models, basis and the drop with its interval (`language_interval`), the
    typical (median) and largest model floor, the verdict (`language_verdict`) and its reason.

    `cells` and `floors` are the run's `cell_tests` and `floor_cells`; `drops`, the run's `language_drops`,
    whose intervals are the ones used (computed here with the same rule where not given). The floors are
    those of every model with rewordings, whether or not it has this language: rewording is one yardstick
    for all. Where an interval end lies within its Monte Carlo error of a floor, the verdict is
    `BOUNDARY` (`settled_verdict`)."""
    pairs = paired_with_english(item_scores(scores, options.aggregate), "translation").dropna(subset=["change"])
    known = model_floors(floors).dropna().to_numpy(dtype=float)
    typical, largest = (float(np.median(known)), float(known.max())) if known.size else (np.nan, np.nan)
    rows = []
    given = drops.set_index("language") if drops is not None and min_models == MIN_MODELS else None
    for language, mine in cells.groupby("language", sort=True):
        if given is not None and language in given.index:
            row = given.loc[language]
            basis, drop, low, high, low_se, high_se = (row["basis"], row["drop"], row["drop_low"], row["drop_high"],
                                                       row["drop_low_se"], row["drop_high_se"])
        else:
            item_drops = -pairs.loc[pairs["language"] == language].groupby("base_id")["change"].mean().to_numpy()
            basis, drop, low, high, low_se, high_se = language_interval(
                mine["drop"].to_numpy(dtype=float), item_drops, options, key=(language,), min_models=min_models)
        verdict, possible = settled_verdict(low, high, largest_floor=largest, typical_floor=typical, low_se=low_se,
                                            high_se=high_se)
        rows.append({
            "language": language, "n_models": len(mine), "basis": basis, "drop": drop, "low": low, "high": high,
            "typical_floor": typical, "largest_floor": largest, "verdict": verdict,
            "reason": verdict_reason(verdict, low, high, largest_floor=largest, typical_floor=typical,
                                     possible=possible),
        })
    return pd.DataFrame(rows, columns=["language", "n_models", "basis", "drop", "low", "high", "typical_floor",
                                       "largest_floor", "verdict", "reason"])


def language_evidence(table: pd.DataFrame, scores: pd.DataFrame,
                      options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """Per language, the evidence of its cells (`verdict_cells`' table) shown beside the verdict:
    reliable_models, above_floor_models, power (median over the models), drop_faithful (mean over the
    models) and the carry-over slope (every pair pooled, the paper's)."""
    pairs = paired_with_english(item_scores(scores, options.aggregate), "translation").dropna(subset=["change"])
    rows = []
    for language, mine in table.groupby("language", sort=True):
        rows.append({
            "language": language, "reliable_models": int(mine["reliable"].sum()),
            "above_floor_models": int(mine["above_floor"].fillna(False).astype(bool).sum()),
            "power": float(mine["power"].median()), "drop_faithful": float(mine["drop_faithful"].mean()),
            "slope": carry_point(pairs.loc[pairs["language"] == language])["slope"],
        })
    return pd.DataFrame(rows, columns=["language", "reliable_models", "above_floor_models", "power", "drop_faithful",
                                       "slope"])
