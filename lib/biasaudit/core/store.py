"""What a run keeps on disk, and how it is written so that nothing is lost or written twice.

- Scores are a partitioned parquet dataset (`runs/<run>/scores/`): every scored chunk is one new
  file, written to a temporary name and renamed, so appending never rewrites what is there (the
  cost of a resumed run stays linear in what it scores) and a killed run leaves only whole files.
  A later file supersedes an earlier one for the same (model, scorer_boundary, item_id), which is
  how a rescored version replaces a stale one. Readers see one table (`ScoreStore.read`).
- Expensive results (cell tests, floor tests, bootstraps, detection runs) are computed once per
  run and stored under `runs/<run>/results/`, keyed by the options and scores that made them
  (`ResultStore.get`); later chapters read them instead of computing them again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import sys
import time
import uuid
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from biasaudit.core.columns import ITEM_COLUMNS, OPTIONS

SCORE_KEY: list[str] = ["model", "scorer_boundary", "item_id"]
# A column of the stored parts only, not of the scores table: the precision a row was scored in
# ("float32", "bfloat16", ...), which decides whether a rerun that names a precision reuses it.
DTYPE_COLUMN = "scoring_dtype"
TEXT_COLUMNS: list[str] = ["context", *OPTIONS]  # a stored row is reused only while these are unchanged
SCORE_COLUMNS: list[str] = [f"{kind}_{o}" for o in OPTIONS for kind in ("lp_sum", "ntok", "lp_mean")]
# Files of the single-file layout of earlier versions, read as the oldest parts of the dataset.
LEGACY_FILES: tuple[str, ...] = ("scores.parquet", "scores_boundary_error.parquet")


class StoreWarning(UserWarning):
    """A stored file could not be read and was set aside; its rows will be computed again."""


def write_atomically(table: pd.DataFrame, path: Path) -> Path:
    """Write a parquet file under a temporary name in the same folder, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.partial")
    table.to_parquet(partial, index=False)
    os.replace(partial, path)
    return path


def _read_part(path: Path) -> pd.DataFrame | None:
    """One stored part, or None (with a warning) when it is truncated or corrupt: the file is renamed
    to *.corrupt so that it is looked at once, and its rows count as not yet done."""
    try:
        return pq.read_table(path).to_pandas()
    except Exception as err:  # pyarrow raises several types for a damaged file
        aside = path.with_name(path.name + ".corrupt")
        os.replace(path, aside)
        warnings.warn(f"{path}: cannot be read ({type(err).__name__}: {err}); set aside as {aside.name}, "
                      "its rows will be scored again", StoreWarning, stacklevel=3)
        return None


class ScoreStore:
    """A run's scores: `runs/<run>/scores/part-<time>-<id>.parquet`, one file per scored chunk."""

    def __init__(self, run_folder: Path):
        self.run_folder = Path(run_folder)
        self.folder = self.run_folder / "scores"

    def parts(self) -> list[Path]:
        """Stored parts, oldest first (legacy single files come before every part)."""
        legacy = [self.run_folder / name for name in LEGACY_FILES if (self.run_folder / name).exists()]
        parts = sorted(self.folder.glob("part-*.parquet")) if self.folder.is_dir() else []
        return legacy + parts

    def exists(self) -> bool:
        return bool(self.parts())

    def append(self, rows: pd.DataFrame) -> Path | None:
        """Store rows as a new part; nothing already stored is read or rewritten."""
        if rows.empty:
            return None
        name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        return write_atomically(rows.reset_index(drop=True), self.folder / name)

    def read(self, *, model: str | None = None, scorer_boundary: bool | None = None) -> pd.DataFrame:
        """Every stored row, the latest per (model, scorer_boundary, item_id), optionally for one model
        and setting. An empty table (no columns) when nothing is stored."""
        frames = []
        for path in self.parts():
            part = _read_part(path)
            if part is None or part.empty:
                continue
            if model is not None:
                part = part.loc[part["model"] == model]
            if scorer_boundary is not None:
                part = part.loc[part["scorer_boundary"] == scorer_boundary]
            frames.append(part)
        if not frames:
            return pd.DataFrame()
        table = pd.concat(frames, ignore_index=True)
        return table.drop_duplicates(SCORE_KEY, keep="last").reset_index(drop=True)

    def compact(self) -> None:
        """Merge all parts into one (the latest row per key); a reader sees the same table before and
        after. Written first, older parts removed after, so an interruption loses nothing."""
        parts = self.parts()
        if len(parts) <= 1:
            return
        table = self.read()
        self.append(table)
        for path in parts:
            path.unlink(missing_ok=True)

    def clear(self, keep_models: tuple[str, ...] | list[str] = ()) -> None:
        """Remove every stored score but those of `keep_models` (an import replaces the released models' scores
        and keeps those scored here beside them). The kept rows are written before anything is removed, so an
        interruption loses nothing."""
        parts = self.parts()
        if keep_models and parts:
            table = self.read()
            self.append(table.loc[table["model"].isin(list(keep_models))] if len(table) else table)
        for path in parts:
            path.unlink(missing_ok=True)


class RunLockedError(RuntimeError):
    """Another live process is writing this run."""


LOCK_NAME = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


@contextmanager
def run_lock(run_folder: Path, *, wait: float = 0.0, poll: float = 0.5) -> Iterator[Path]:
    """Hold `runs/<run>/.lock` while writing a run: one writer per run.

    The lock is an advisory lock of the operating system on that file (`fcntl.flock`), so it dies
    with its process: a lock left by a killed run is free again, and the next writer takes it over
    (with a warning naming the process that left it). The file holds the writer's process id, host,
    start time and command, which a second writer names when it stops with RunLockedError (after
    waiting up to `wait` seconds). Re-entrant within a process.
    """
    path = Path(run_folder) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
          "command": " ".join(sys.argv)[:200]}
    handle = open(path, "a+", encoding="utf-8")
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _read_lock(path)
                if holder.get("pid") == me["pid"] and holder.get("host") == me["host"]:
                    handle.close()
                    yield path  # this process holds it already (a writer calling another writer)
                    return
                if time.monotonic() < deadline:
                    time.sleep(poll)
                    continue
                raise RunLockedError(
                    f"{path.parent}: this run is being written by process {holder.get('pid', '?')} on "
                    f"{holder.get('host', '?')} since {holder.get('started', '?')} ({holder.get('command', '')}); "
                    "wait for it to finish, or give this run another run_name") from None
        left = _read_lock(path)
        if left.get("pid") not in (None, me["pid"]):
            warnings.warn(f"{path}: taking over the lock left by process {left['pid']} (started "
                          f"{left.get('started', '?')}), which stopped without releasing it", StoreWarning,
                          stacklevel=3)
        handle.seek(0)
        handle.truncate()
        json.dump(me, handle)
        handle.flush()
        try:
            yield path
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def _read_lock(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}


def table_fingerprint(table: pd.DataFrame) -> str:
    """A short hash of a table's content (values, column names and order): results computed from
    another table never match its key."""
    hashed = pd.util.hash_pandas_object(table, index=False).to_numpy()
    digest = hashlib.sha256(np.ascontiguousarray(hashed).tobytes())
    digest.update("|".join(map(str, table.columns)).encode())
    return digest.hexdigest()[:16]


class ResultStore:
    """Tables computed once and read back: `runs/<run>/results/<name>-<key>.parquet`."""

    def __init__(self, run_folder: Path):
        self.folder = Path(run_folder) / "results"

    def path(self, name: str, key: str) -> Path:
        return self.folder / f"{name}-{key}.parquet"

    def get(self, name: str, key: str, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """The stored table `name` for `key`, computed (and stored) when absent or unreadable."""
        path = self.path(name, key)
        if path.exists():
            stored = _read_part(path)
            if stored is not None:
                return stored
        table = compute()
        write_atomically(table, path)
        return table


def stored_scores(store: ScoreStore, model_name: str, scorer_boundary: bool, items: pd.DataFrame,
                  dtype_name: str | None = None) -> pd.DataFrame:
    """Stored rows that still match the items (same id and texts) for this model and setting, and
    were scored in `dtype_name` when one is given (rows stored before the precision was recorded
    match only None). Reading them needs no model, so a run whose scores are all stored never
    loads torch (`pipeline.score_run`)."""
    mine = store.read(model=model_name, scorer_boundary=scorer_boundary)
    if mine.empty:
        return pd.DataFrame()
    if dtype_name is not None:
        stored_in = mine[DTYPE_COLUMN] if DTYPE_COLUMN in mine else pd.Series(None, index=mine.index, dtype=object)
        mine = mine.loc[stored_in == dtype_name].reset_index(drop=True)
        if mine.empty:
            return pd.DataFrame()
    merged = mine.merge(items[["item_id", *TEXT_COLUMNS, "language"]], on="item_id", suffixes=("", "_now"))
    same = np.logical_and.reduce([merged[c] == merged[f"{c}_now"] for c in [*TEXT_COLUMNS, "language"]])
    return merged.loc[same, list(mine.columns)].reset_index(drop=True)


def scores_for_items(items: pd.DataFrame, done: pd.DataFrame, *, n_scored: int,
                     batch_size: int | str) -> pd.DataFrame:
    """The scores table of `items` from their scored rows `done`. Item columns come from `items` as
    given now: stored rows may predate an edit of metadata (dimension, via, ...) that did not change
    the texts, and so was not rescored."""
    scores = done[["model", "item_id", *SCORE_COLUMNS, "scorer_boundary"]]
    table = items.merge(scores, on="item_id", how="inner", validate="one_to_one")
    table = table[["model", *ITEM_COLUMNS, *SCORE_COLUMNS, "scorer_boundary"]]
    table.attrs["batch_size"] = batch_size  # "auto" when nothing needed scoring
    table.attrs["n_scored"] = n_scored  # the rest were read back from the store
    return table
