"""Files fetched from public repositories at pinned commits, checked by sha256.

Used for the paper's released scores (`biasaudit.data.released`) and LangBiTe's template library
(`biasaudit.templates.library`). A file whose hash the project knows must match it; for the others the
hash of the first download is recorded in the folder (`sha256-first-download.json`) and later reads
must match that. Without network access the error says which files to fetch and where to put them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

FIRST_SEEN_HASHES: str = "sha256-first-download.json"


class DownloadError(RuntimeError):
    """A pinned file could not be fetched, or is not what its pin says."""


class DownloadWarning(UserWarning):
    """A file had no pinned hash; the hash of its first download was recorded."""


@dataclass(frozen=True)
class PinnedFile:
    """One file: its local name, repository, path in it, commit, and sha256 when known."""

    name: str
    repository: str
    path: str
    commit: str
    sha256: str | None = None

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/{self.path}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _first_seen(folder: Path) -> dict[str, str]:
    path = folder / FIRST_SEEN_HASHES
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def verified(file: PinnedFile, folder: Path) -> bool:
    """The file is in `folder` and matches its pin (or the hash recorded at its first download)."""
    path = folder / file.name
    expected = file.sha256 or _first_seen(folder).get(file.name)
    return path.exists() and (expected is None or sha256_of(path) == expected)


def offline_message(missing: list[PinnedFile], folder: Path, reason: str, alternative: str) -> str:
    lines = "\n".join(f"  {f.url}\n      -> {folder / f.name}" for f in missing)
    return (f"Could not download {len(missing)} file(s) ({reason}).\nDownload them on a machine with network "
            f"access and put them in\n{folder} (the cache; keep the file names):\n{lines}\n{alternative}")


def fetch(files: list[PinnedFile], folder: Path, *, timeout: float = 60.0, alternative: str = "") -> Path:
    """Download the files not yet verified in `folder` over HTTPS, check each one's sha256, and
    return the folder. A download goes to a temporary file first, so nothing half-written stays."""
    folder.mkdir(parents=True, exist_ok=True)
    missing = [f for f in files if not verified(f, folder)]
    first_seen = _first_seen(folder)
    for position, file in enumerate(missing):
        part_path: Path | None = None
        try:
            with urllib.request.urlopen(file.url, timeout=timeout) as response, \
                    tempfile.NamedTemporaryFile(dir=folder, delete=False, suffix=".part") as part:
                part_path = Path(part.name)
                shutil.copyfileobj(response, part)
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            if part_path is not None:
                part_path.unlink(missing_ok=True)
            raise DownloadError(offline_message(missing[position:], folder, str(err), alternative)) from err
        digest = sha256_of(part_path)
        expected = file.sha256 or first_seen.get(file.name)
        if expected is not None and digest != expected:
            part_path.unlink(missing_ok=True)
            raise DownloadError(f"{file.url}: sha256 {digest} does not match the pinned {expected}; the download "
                                "is corrupt or the pin is wrong. Nothing was kept.")
        os.replace(part_path, folder / file.name)
        if file.sha256 is None and file.name not in first_seen:
            first_seen[file.name] = digest
            (folder / FIRST_SEEN_HASHES).write_text(json.dumps(first_seen, indent=1, sort_keys=True), encoding="utf-8")
            warnings.warn(f"{file.name}: no pinned sha256; recorded {digest} from this first download, later reads "
                          "are checked against it", DownloadWarning, stacklevel=2)
    return folder
