"""The steps a run chains together: gather the item versions, score them, and read results back.

Notebooks call these so that what a chapter does is one readable line, and so that a run
killed halfway resumes (scores are appended per chunk to runs/<run>/scores.parquet).
"""

from __future__ import annotations

import time

import pandas as pd

from biasaudit.items import read_items, select_items
from biasaudit.paths import project_path, run_dir
from biasaudit.scoring import score

VARIANTS_WITH_REWORDINGS = ["original", "translation", "rewording"]


def prepare_items(
    run_name: str,
    *,
    item_banks: list[str],
    languages: list[str],
    include_rewordings: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read the item banks, keep the run's languages, set aside collapsed contrasts; save both.

    Writes runs/<run>/items.parquet (what gets scored) and runs/<run>/collapsed.parquet
    (translations whose two contrasting continuations became the same text).
    """
    banks = pd.concat([read_items(project_path(path)) for path in item_banks], ignore_index=True)
    duplicated = banks.loc[banks["item_id"].duplicated(), "item_id"].tolist()
    if duplicated:
        raise ValueError(f"item ids appear in more than one bank of {item_banks}: {duplicated[:5]}")
    variants = VARIANTS_WITH_REWORDINGS if include_rewordings else ["original", "translation"]
    wanted = [*languages, "en"]
    items, collapsed = select_items(banks, languages=wanted, variants=variants)
    folder = run_dir(run_name)
    items.to_parquet(folder / "items.parquet", index=False)
    collapsed.to_parquet(folder / "collapsed.parquet", index=False)
    return items, collapsed


def score_run(
    run_name: str,
    items: pd.DataFrame,
    *,
    models: list[str],
    batch_size: int = 16,
    device: str | None = None,
    scorer_boundary: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score the items with every model, resuming from runs/<run>/; return (scores, timings)."""
    out_path = run_dir(run_name) / ("scores_boundary_error.parquet" if scorer_boundary else "scores.parquet")
    tables, timings = [], []
    for model in models:
        started = time.perf_counter()
        tables.append(score(items, model, batch_size=batch_size, device=device,
                            scorer_boundary=scorer_boundary, out_path=out_path))
        timings.append({"model": model, "item_versions": len(items), "seconds": time.perf_counter() - started})
    return pd.concat(tables, ignore_index=True), pd.DataFrame(timings)


def read_scores(run_name: str, *, models: list[str] | None = None, scorer_boundary: bool = False) -> pd.DataFrame:
    """The scores a run's 02_score chapter wrote, for the run's current items (and `models`, if given)."""
    folder = run_dir(run_name)
    path = folder / ("scores_boundary_error.parquet" if scorer_boundary else "scores.parquet")
    if not path.exists():
        raise FileNotFoundError(f"{path}: no scores yet; run the 02_score notebook (or `make book`) first")
    scores = pd.read_parquet(path)
    items = pd.read_parquet(folder / "items.parquet")
    keep = scores["item_id"].isin(items["item_id"])
    if models is not None:
        keep &= scores["model"].isin(models)
    return scores.loc[keep].reset_index(drop=True)
