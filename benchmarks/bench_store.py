"""Storing scores chunk by chunk: one new part per chunk (now) against rewriting one file (before).

A study-sized run (10 models × 3,100 item versions, chunks of 64) appends ~490 chunks. Rewriting
the whole table at every chunk costs O(n²) in the rows stored; writing one part per chunk costs
O(n). Prints both times and their ratio, then the time to read the table back from the parts.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from biasaudit.core.store import ScoreStore, write_atomically


def chunk(model: int, start: int, size: int) -> pd.DataFrame:
    ids = [f"item-{i:05d}/xx" for i in range(start, start + size)]
    frame = pd.DataFrame({"model": f"m{model}", "scorer_boundary": False, "item_id": ids,
                          "context": "some context text of a realistic length for an item",
                          "stereotyped": "a continuation", "anti_stereotyped": "another continuation"})
    for column in ("lp_sum", "ntok", "lp_mean"):
        for option in ("stereotyped", "anti_stereotyped", "third"):
            frame[f"{column}_{option}"] = np.random.default_rng(start).normal(size=size)
    return frame


def main(models: int = 10, versions: int = 3_100, size: int = 64) -> None:
    chunks = [chunk(m, s, min(size, versions - s)) for m in range(models) for s in range(0, versions, size)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scores.parquet"
        started = time.perf_counter()
        for rows in chunks:  # the old way: read what is there, add the chunk, write everything again
            stored = pd.read_parquet(path) if path.exists() else None
            write_atomically(rows if stored is None else pd.concat([stored, rows], ignore_index=True), path)
        rewrite = time.perf_counter() - started
        store = ScoreStore(Path(tmp) / "run")
        started = time.perf_counter()
        for rows in chunks:
            store.append(rows)
        parts = time.perf_counter() - started
        started = time.perf_counter()
        table = store.read()
        read = time.perf_counter() - started
    print(f"{len(chunks)} chunks, {len(table):,} rows: rewrite one file {rewrite:.1f} s, one part per chunk "
          f"{parts:.1f} s ({rewrite / parts:.1f}x); reading the parts back {read:.1f} s")


if __name__ == "__main__":
    main()
