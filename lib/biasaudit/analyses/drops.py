"""Language drops and the item-by-item test of every model × language cell (chapter 10).

The test of a cell: the per-item changes (translated soft score − English soft score on the same
base items) get a paired sign-flip permutation test; the p-values of a family of cells are then
corrected together with Benjamini–Hochberg, and a cell is reliable when q < alpha. The drop of a
cell is minus its mean change (English − language; positive = lower in the language).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasaudit.analyses import stats
from biasaudit.analyses.carry_over import carry_point
from biasaudit.analyses.intervals import language_interval
from biasaudit.analyses.refine import refine_near_threshold
from biasaudit.analyses.scores import item_scores, paired_with_english, versions_in
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions

CELL_COLUMNS: list[str] = ["n", "drop", "p", "q", "reliable", "drop_binary", "p_binary", "q_binary",
                           "reliable_binary", "sd", "noise_only", "flips", "flips_binary"]


def cells_from_pairs(pairs: pd.DataFrame, group: str, options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """Sign-flip tests (soft and binary) of every model × `group` cell of paired changes, with BH
    over all cells (cells near the threshold tested again with more draws: `refine.refine_near_threshold`;
    `flips` and `flips_binary` say how many each p rests on), the per-item SD of the changes and the
    noise-only yardstick."""
    tests = {}
    for value in ("change", "change_binary"):
        first = stats.sign_flip_tests(pairs, by=["model", group], value=value,
                                      n_permutations=options.n_permutations, seed=options.seed)
        tests[value] = refine_near_threshold(pairs, first, by=["model", group], value=value,
                                                   n_permutations=options.n_permutations, seed=options.seed,
                                                   alpha=options.alpha)
    soft, binary = tests["change"], tests["change_binary"]
    cells = soft.rename(columns={"mean": "change"}).merge(
        binary[["model", group, "mean", "p", "flips"]].rename(columns={"mean": "change_binary", "p": "p_binary",
                                                                      "flips": "flips_binary"}),
        on=["model", group],
    )
    spread = (
        pairs.groupby(["model", group], sort=True)["change"]
        .agg(sd=lambda d: float(d.dropna().std(ddof=1)) if d.notna().sum() > 1 else np.nan,
             noise_only=lambda d: stats.noise_only(d.to_numpy()))
        .reset_index()
    )
    cells = cells.merge(spread, on=["model", group], how="left")
    cells["drop"] = -cells["change"]
    cells["drop_binary"] = -cells["change_binary"]
    cells = stats.add_bh(cells, p_col="p", q_col="q", alpha=options.alpha, reliable_col="reliable")
    cells = stats.add_bh(cells, p_col="p_binary", q_col="q_binary", alpha=options.alpha,
                         reliable_col="reliable_binary")
    return cells[["model", group, *CELL_COLUMNS]]


def cell_tests(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    variant: str = "translation",
    group: str = "language",
    languages: list[str] | None = None,
) -> pd.DataFrame:
    """One row per model × `group` cell: paired n, drop, sign-flip p (soft and binary), BH q, reliable,
    and the SD of the per-item changes with the noise-only yardstick s·sqrt(2/π)/sqrt(n).

    The family for Benjamini–Hochberg is every cell in this table (all models × all groups).
    `group` is `language` for translations and `via` for rewordings (one cell per route).
    `languages` keeps only versions in those languages (None: all); the noise floor uses
    `variant="rewording", group="via", languages=["en"]` (see `floor_cells`), since a bank may also
    hold rewordings of its translations.
    """
    pairs = versions_in(paired_with_english(item_scores(scores, options.aggregate), variant), languages)
    return cells_from_pairs(pairs, group, options)


def language_drops(
    scores: pd.DataFrame,
    options: StudyOptions = DEFAULT_OPTIONS,
    *,
    cells: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per language: mean soft and binary score, drop vs English with its 95% interval
    (`intervals.language_interval`: across models with enough of them, else over items; `basis` says
    which, and drop_low_se, drop_high_se give a bootstrap end's Monte Carlo error), number of models with a
    reliable drop (soft, binary), carry-over slope (every pair pooled, the paper's:
    `carry_over.carry_point`), same choice, fluency.

    English itself is the first row (drop 0 by definition). This is the one interval of a language's
    drop: the verdict (chapter 22) and chapter 16 show the same. `cells` are this table's `cell_tests`
    when already computed (they are not computed twice).
    """
    scored = item_scores(scores, options.aggregate)
    pairs = paired_with_english(scored, "translation")
    if cells is None:
        cells = cell_tests(scores, options)
    rows = []
    english = scored.loc[scored["variant"] == "original"]
    rows.append({
        "language": "en", "n_items": english["base_id"].nunique(), "n_models": english["model"].nunique(),
        "soft": english["soft"].mean(), "binary": english["binary"].mean(),
        "basis": "", "drop": 0.0, "drop_low": np.nan, "drop_high": np.nan, "drop_low_se": np.nan, "drop_high_se": np.nan,
        "reliable_drops": np.nan, "reliable_drops_binary": np.nan,
        "slope": 1.0, "same_choice": 1.0, "fluency": english["fluency"].mean(),
    })
    for language, group in pairs.groupby("language", sort=False):
        per_model = cells.loc[cells["language"] == language]
        item_drops = -group.groupby("base_id")["change"].mean().dropna().to_numpy()
        basis, mean_drop, low, high, low_se, high_se = language_interval(
            per_model["drop"].to_numpy(dtype=float), item_drops, options, key=(language,))
        versions = scored.loc[(scored["variant"] == "translation") & (scored["language"] == language)]
        rows.append({
            "language": language, "n_items": group["base_id"].nunique(), "n_models": group["model"].nunique(),
            "soft": group["soft"].mean(), "binary": group["binary"].mean(),
            "basis": basis, "drop": mean_drop, "drop_low": low, "drop_high": high, "drop_low_se": low_se,
            "drop_high_se": high_se, "reliable_drops": int((per_model["reliable"] & (per_model["drop"] > 0)).sum()),
            "reliable_drops_binary": int((per_model["reliable_binary"] & (per_model["drop_binary"] > 0)).sum()),
            "slope": carry_point(group)["slope"],  # every pair pooled, the paper's (methods page)
            "same_choice": float((group["binary"] == group["binary_en"]).mean()),
            "fluency": versions["fluency"].mean(),
        })
    return pd.DataFrame(rows)


def model_language_drops(cells: pd.DataFrame) -> pd.DataFrame:
    """The model × language drop matrix (rows models, columns languages) for the heatmap."""
    return cells.pivot(index="model", columns="language", values="drop")


def empty_cells(group: str = "language") -> pd.DataFrame:
    """A cell table with no cells (a subset without translations)."""
    return pd.DataFrame(columns=["model", group, *CELL_COLUMNS])


