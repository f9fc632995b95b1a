"""The one key-value cache of the project: model outputs that cost time to make, kept on disk.

Translations, paraphrases and judge verdicts (`translate.cache`), sentence embeddings
(`translate.judge`) and chat replies (`lm.generate`) each live in a SQLite file of this kind
under the cache folder, keyed by a hash of everything the output depends on (`cache_key`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Iterable, Sequence

from biasaudit.core.paths import cache_dir

CACHE_FILES: dict[str, str] = {"translations": "translations.sqlite", "replies": "replies.sqlite",
                               "embeddings": "embeddings.sqlite"}


def cache_file(kind: str) -> Path:
    """<cache_dir>/<kind>.sqlite for one of CACHE_FILES (BIASAUDIT_CACHE_DIR moves the folder)."""
    return cache_dir() / CACHE_FILES[kind]


class KeyValueStore:
    """A small SQLite table of key → value.

    Every `put_many` commits, so whatever finished before an interruption is kept. SQLite
    rather than a folder of files, because one run writes tens of thousands of short entries.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB)")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def get_many(self, keys: Sequence[str]) -> dict[str, object]:
        found: dict[str, object] = {}
        with self._connect() as db:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                found.update(db.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk).fetchall())
        return found

    def put_many(self, rows: Iterable[tuple[str, object]]) -> None:
        with self._connect() as db:
            db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?)", list(rows))

    def __len__(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


def cache_key(*parts: object) -> str:
    """A stable hash of the parts (JSON-encoded): the key of one cache entry."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
