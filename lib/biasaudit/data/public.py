"""What StereoSet and BBQ share: where a mirror folder is, how items are sampled, how loading
stages are counted, and how a bad row is named in an error.

Both loaders go through these helpers, so the two sources behave and report the same way.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from biasaudit.core.paths import project_path
from biasaudit.data.item_table import ITEM_COLUMNS, ItemError

DATA_DIR_VARIABLE: str = "BIASAUDIT_DATA_DIR"
STAGE_COLUMNS: list[str] = ["source", "category", "stage", "n", "reason"]

class SourceDataError(ItemError):
    """A source file (or hub row) not in the expected format; the message names file, row and field."""


def where(origin: str, row: str | int, field: str) -> str:
    """The location prefix every source error starts with, so a reader can find the bad value."""
    return f"{origin}: row {row}, field {field!r}"


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    """The mirror folder: the argument, else $BIASAUDIT_DATA_DIR, else None (use the hub).

    A relative path is taken from the project root, as every other path in a run is.
    """
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_VARIABLE) or None
    if data_dir is None:
        return None
    folder = project_path(data_dir)
    if not folder.is_dir():
        raise SourceDataError(
            f"{folder}: the data folder does not exist; pass data_dir= or set {DATA_DIR_VARIABLE} "
            "to a mirror folder (layout in docs/data.md), or leave both unset to use the hub"
        )
    return folder


def check_per_category(per_category: int | None) -> None:
    """Reject a sample size that cannot be meant (negative, or not a whole number)."""
    if per_category is None:
        return
    if isinstance(per_category, bool) or not isinstance(per_category, (int, np.integer)) or per_category < 0:
        raise ValueError(f"per_category must be None or a whole number >= 0, got {per_category!r}")


def seeded_sample(items: pd.DataFrame, per_category: int | None, seed: int) -> pd.DataFrame:
    """Keep `per_category` items per category, drawn reproducibly; None keeps every item.

    Each category draws from its own generator, seeded by (seed, category name), over its
    base ids in sorted order: the sample does not depend on file order, on the reader, or on
    which other categories are loaded. Row order is kept.
    """
    check_per_category(per_category)
    if per_category is None or items.empty:
        return items.reset_index(drop=True)
    keep: set[str] = set()
    for category in sorted(items["category"].unique()):
        ids = sorted(items.loc[items["category"] == category, "base_id"].unique())
        if len(ids) <= per_category:
            keep.update(ids)
            continue
        rng = np.random.default_rng([seed, zlib.crc32(category.encode("utf-8"))])
        chosen = rng.choice(len(ids), size=per_category, replace=False)
        keep.update(ids[i] for i in chosen)
    return items.loc[items["base_id"].isin(keep)].reset_index(drop=True)


def empty_items() -> pd.DataFrame:
    """An items table with the contract's columns and no rows."""
    return pd.DataFrame({column: pd.Series(dtype=object) for column in ITEM_COLUMNS})


def stage_table(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """The tidy stage counts (source, category, stage, n, reason), n as int."""
    table = pd.DataFrame(list(rows), columns=STAGE_COLUMNS)
    table["n"] = table["n"].astype("int64")
    return table


def read_text(path: Path) -> str:
    """A source file's text; a file that is not UTF-8 is named in the error."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SourceDataError(f"{where(str(path), 'top level', '<document>')}: not UTF-8 text ({err})") from None


def jsonl_entries(path: Path, expected: str) -> list[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; `expected` says what a line should hold."""
    entries = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append((number, json.loads(line)))
        except json.JSONDecodeError as err:
            raise SourceDataError(
                f"{where(str(path), number, '<line>')}: not a JSON object ({err.msg}); expected {expected}"
            ) from None
    return entries
