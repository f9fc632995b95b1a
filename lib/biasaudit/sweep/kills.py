"""The kill-and-resume case: a real scoring process killed with SIGKILL after k chunks are stored
(several k, seeded) and while a chunk is written, then resumed; nothing lost, nothing stored twice."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from biasaudit.sweep.harness import (
    CHUNK_ITEMS,
    SEED,
    TINY,
    CaseFailed,
    bank_rows,
    first_line,
    kill,
    one_thread,
    same_scores,
    stored_rows,
    wait_for_line,
    worker,
)

# --------------------------------------------------------------------------------------------
# Interrupted and concurrent runs
# --------------------------------------------------------------------------------------------

def _scoring_items(folder: Path, n_bases: int = 64) -> Path:
    items = bank_rows(n_bases=n_bases, languages=("es", "zh", "hi", "ar", "ko"))
    path = folder / "items.parquet"
    items.to_parquet(path, index=False)
    return path


def _reference(items_path: Path) -> pd.DataFrame:
    from biasaudit.lm.scoring import score

    with one_thread():
        return score(pd.read_parquet(items_path), TINY, batch_size=2, chunk_items=CHUNK_ITEMS, progress=False)


@dataclass
class Kill:
    """Where one kill of a scoring worker landed, and what the store held after it."""

    place: str  # "during model load", "after 6 chunks stored", "while chunk 14 was being written"
    stored: int  # versions stored after the kill
    writing: bool = False  # the kill was aimed at a chunk being written
    partial_seen: bool = False  # ... and its half-written file was on disk when SIGKILL was sent


@dataclass
class KilledRun:
    """What the kill-and-resume case did and found."""

    kills: list[Kill]
    total: int  # versions in the run
    chunks: int  # chunks an uninterrupted run stores
    last_scored: int  # versions the last (uninterrupted) run scored itself
    partials_left: int  # half-written files still in the store at the end (left aside, never read)
    lost: int


def stored_twice(rows: pd.DataFrame) -> int:
    """Stored rows that repeat a (model, item_id, scorer_boundary) already stored: scored twice."""
    return int(rows.duplicated(["model", "item_id", "scorer_boundary"]).sum())


def check_resumed(rows: pd.DataFrame, reference: pd.DataFrame) -> int:
    """The stored rows of a resumed run must hold every version once, with the scores of an
    uninterrupted run (`reference`); returns how many were lost (0), or raises CaseFailed."""
    twice, lost = stored_twice(rows), same_scores(reference, rows)
    if twice or lost:
        raise CaseFailed(f"{twice} stored row(s) scored again, {lost} version(s) missing or different")
    return lost


def check_kills(kills: list[Kill], total: int) -> None:
    """The case tests resuming only if a kill left a partly stored run and one hit a chunk mid-write."""
    if not any(0 < hit.stored < total for hit in kills):
        raise CaseFailed(f"no kill landed mid-run: versions stored after each kill "
                         f"{' → '.join(str(hit.stored) for hit in kills)} of {total}")
    if not any(hit.writing and hit.partial_seen for hit in kills):
        raise CaseFailed("no kill landed while a chunk's file was being written (no half-written file on disk)")


def _kill_points(chunks: int, rng: np.random.Generator) -> list[tuple[str, int]]:
    """Where to kill a run of `chunks` chunks: during model load, then after a seeded number of
    chunks stored (early, middle, late) and while a seeded chunk is written, counted over the
    whole run and always short of its end, so that a stored prefix is there to resume from."""
    if chunks < 10:
        raise ValueError(f"a run of {chunks} chunks is too short to kill early, mid-write, in the middle and late")

    def draw(low: float, high: float, at_least: int) -> int:
        low, high = max(at_least, int(low * chunks)), max(at_least, int(high * chunks))
        return int(rng.integers(low, high + 1))

    early = draw(0.1, 0.25, 1)
    writing = draw(0.25, 0.4, early + 2)  # the chunk being written: chunks 1 .. writing - 1 are stored
    middle = draw(0.4, 0.6, writing)
    late = min(draw(0.75, 0.95, middle + 1), chunks - 1)
    return [("load", 0), ("stored", early), ("writing", writing), ("stored", middle), ("stored", late)]


def kill_and_resume(folder: Path, n_bases: int = 16) -> KilledRun:
    """Kill a scoring worker (SIGKILL, a real subprocess) at points tied to its progress, then let
    it finish. The worker says on stdout when it has stored a chunk or is writing one, and waits at
    the point it was asked to stop at, so each kill lands there on a machine of any speed."""

    items_path = _scoring_items(folder, n_bases=n_bases)
    total = len(pd.read_parquet(items_path))
    chunks = -(-total // CHUNK_ITEMS)
    run_folder = folder / "killed"
    kills: list[Kill] = []
    rescored: set[str] = set()  # versions of the chunk a kill caught mid-write
    for kind, number in _kill_points(chunks, np.random.default_rng(SEED)):
        before = len(stored_rows(run_folder))
        done_chunks = before // CHUNK_ITEMS  # every stored chunk is whole: the last is never reached
        pause = "" if kind == "load" else f"{kind}:{number - done_chunks}"
        process = worker("score", str(run_folder), str(items_path), pause, stdin=subprocess.PIPE)
        try:
            said = wait_for_line(process, "loading" if kind == "load" else f"{kind} {number - done_chunks}")
            partial = Path(said.split(maxsplit=2)[2]) if kind == "writing" else None
            partial_seen = partial is not None and partial.exists()  # checked while the worker waits
        finally:
            rest = kill(process)
        rows = stored_rows(run_folder)
        if stored_twice(rows):
            raise CaseFailed(f"after a kill {stored_twice(rows)} stored row(s) repeat rows stored before")
        if kind == "load":
            place = "during model load" if "scoring" not in rest.split() else "after model load, before scoring"
            expected = before
        elif kind == "stored":
            place, expected = f"after {number} chunks stored", number * CHUNK_ITEMS
        else:
            place, expected = f"while chunk {number} was being written", (number - 1) * CHUNK_ITEMS
            if partial_seen:
                caught = set(pq.read_table(partial).column("item_id").to_pylist())
                if caught & set(rows["item_id"]):
                    raise CaseFailed(f"the chunk killed mid-write ({partial.name}) was stored all the same")
                rescored |= caught
        if len(rows) != expected:
            raise CaseFailed(f"{len(rows)} versions stored after a kill {place}, not {expected}")
        kills.append(Kill(place, len(rows), writing=kind == "writing", partial_seen=partial_seen))
    check_kills(kills, total)
    process = worker("score", str(run_folder), str(items_path), "", stdin=subprocess.DEVNULL)
    output, errors = process.communicate(timeout=600)
    if process.returncode != 0:
        raise CaseFailed(f"the last run failed: {first_line(errors)}")
    last_scored = int(output.split()[output.split().index("done") + 1])
    rows = stored_rows(run_folder)
    lost = check_resumed(rows, _reference(items_path))
    if last_scored != total - kills[-1].stored:
        raise CaseFailed(f"the last run scored {last_scored} versions, not the {total - kills[-1].stored} not stored")
    if not rescored <= set(rows["item_id"]):
        raise CaseFailed("the chunk killed mid-write was not scored again")
    partials = len(list((run_folder / "scores").glob(".*.partial")))
    return KilledRun(kills, total, chunks, last_scored, partials, lost)


def describe_killed_run(run: KilledRun) -> tuple[str, str, int]:
    """The row of the sweep's table for a `KilledRun` (its "said" fits the table's 240 characters)."""
    stored = " → ".join(f"{hit.stored} {hit.place}" for hit in run.kills)
    left = (f"{run.partials_left} half-written file left aside, never read" if run.partials_left
            else "the half-written file removed")
    return (f"scoring ({run.chunks} chunks of {CHUNK_ITEMS} versions) killed {len(run.kills)} times at points of its "
            f"progress the worker announces and waits at, then run to the end ({left})",
            f"stored after each kill: {stored}, of {run.total}; then the other {run.last_scored}, none twice: as an "
            "uninterrupted run", run.lost)
