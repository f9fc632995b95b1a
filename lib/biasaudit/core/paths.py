"""Where a run's files live. Paths are resolved from the project root, so notebooks run the
same from the book runner (cwd = notebooks/), from the tests or from a terminal."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT: Path = Path(__file__).resolve().parents[3]  # lib/biasaudit/core/paths.py


def project_path(path: str | Path) -> Path:
    """A path as given if absolute, else relative to the project root."""
    path = Path(path)
    return path if path.is_absolute() else PROJECT_ROOT / path


def cache_dir() -> Path:
    """Where converted weights and other reusable downloads live (BIASAUDIT_CACHE_DIR overrides).

    It lives here, not in `models`, so that modules that only need the folder (translation and
    embedding caches, the released scores) do not load torch."""
    return Path(os.environ.get("BIASAUDIT_CACHE_DIR", Path.home() / ".cache" / "biasaudit"))


def run_dir(run_name: str) -> Path:
    """runs/<run_name>/ (BIASAUDIT_RUNS_DIR moves the runs folder), created on demand."""
    base = Path(os.environ.get("BIASAUDIT_RUNS_DIR", PROJECT_ROOT / "runs"))
    folder = base / run_name
    folder.mkdir(parents=True, exist_ok=True)
    return folder
