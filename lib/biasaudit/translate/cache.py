"""Translators', paraphrasers' and judges' outputs, batched and cached (in `core.keyvalue`'s store).

Raw model outputs are stored keyed by backend, model, settings, languages and text, after every
batch, so a rerun costs nothing and an interrupted run resumes. Cleaning runs again on every read,
so a better cleaning rule needs no new model call. Nothing here loads torch.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
from tqdm.auto import tqdm

from biasaudit.core.keyvalue import KeyValueStore, cache_file, cache_key


def default_cache_path() -> Path:
    """The shared translation cache: <cache_dir>/translations.sqlite (BIASAUDIT_CACHE_DIR moves it)."""
    return cache_file("translations")


@dataclass(frozen=True)
class Outcome:
    """What a backend made of one text: the usable output (None = failed), its raw form, and why it failed."""

    output: str | None
    raw: str
    reason: str = ""


class CachedTextMap(ABC):
    """Map texts to outputs in batches, once per distinct text, through the on-disk cache.

    Subclasses set `backend`, implement `_generate` (texts → raw model outputs) and
    `_outcome` (raw output → usable output or a failure). The cache keeps the raw outputs, the
    expensive part, and cleaning runs on every read, so improving a cleaning rule needs no new
    model call. `settings()` lists whatever else changes the raw output (prompt version,
    decoding), so changing it misses the cache. `cache=False` turns the cache off; a path puts
    it elsewhere (e.g. in the run folder).
    """

    backend: str = "?"

    def __init__(self, name: str, *, batch_size: int = 16, cache: str | Path | bool | None = None,
                 progress: bool = True):
        self.name = name
        self.batch_size = batch_size
        self.progress = progress
        if cache is False:
            self.store = None
        else:
            self.store = KeyValueStore(default_cache_path() if cache in (None, True) else cache)
        self.calls = 0  # texts sent to the model (not served from the cache): tests and timings read it

    def settings(self) -> dict:
        return {}

    def model_name(self, source: str, target: str) -> str:
        return self.name

    @abstractmethod
    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        """Raw model replies for texts not found in the cache, one per text."""

    @abstractmethod
    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        """The cleaned, validated output of one raw reply (or why it failed)."""

    def run_detailed(self, texts: Sequence[str], source: str, target: str) -> pd.DataFrame:
        """One row per input text: text, output (None if failed), raw, reason, cached.

        Empty texts map to empty outputs without a model call.
        """
        texts = [str(t) for t in texts]
        distinct = list(dict.fromkeys(t for t in texts if t.strip()))
        model = self.model_name(source, target)
        keys = {t: cache_key(self.backend, model, self.settings(), source, target, t) for t in distinct}
        raw: dict[str, str] = {}
        if self.store is not None and distinct:
            found = self.store.get_many(list(keys.values()))
            raw = {t: str(found[k]) for t, k in keys.items() if k in found}
        cached = set(raw)
        todo = sorted((t for t in distinct if t not in raw), key=len)
        if todo:
            bar = tqdm(total=len(todo), desc=f"{self.backend} {source}→{target}", disable=not self.progress,
                       leave=False)
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start:start + self.batch_size]
                outputs = self._generate(batch, source, target)
                if len(outputs) != len(batch):
                    raise RuntimeError(f"{type(self).__name__} returned {len(outputs)} outputs for {len(batch)} texts")
                self.calls += len(batch)
                raw.update(zip(batch, outputs))
                if self.store is not None:
                    self.store.put_many((keys[t], o) for t, o in zip(batch, outputs))
                bar.update(len(batch))
            bar.close()
        outcomes = {t: self._outcome(raw[t], t, source, target) for t in distinct}
        rows = []
        for text in texts:
            if not text.strip():
                rows.append({"text": text, "output": text, "raw": text, "reason": "", "cached": False})
            else:
                o = outcomes[text]
                rows.append({"text": text, "output": o.output, "raw": o.raw, "reason": o.reason,
                             "cached": text in cached})
        return pd.DataFrame(rows, columns=["text", "output", "raw", "reason", "cached"])


def prompt_version(*templates: str) -> str:
    """A short hash of prompt templates: part of the cache key, so editing a prompt asks the model again."""
    return hashlib.sha256("\n".join(templates).encode()).hexdigest()[:12]
