"""Appendix 40: what does a run do with bad input and faults? The table of the last fault sweep
(`biasaudit.sweep`, `make sweep`) on this machine."""

from __future__ import annotations

import pandas as pd

from biasaudit.book.prose import count_noun, spoken_list
from biasaudit.book.report import Report, TableStyle
from biasaudit.core.sweep_record import GOOD_OUTCOMES, SWEEP_COLUMNS, counts, read_last_sweep
from biasaudit.run.params import RunParams

SWEEP_STYLE = TableStyle(columns={"group": "group", "case": "case", "done": "what was done",
                                  "said": "what the program said", "outcome": "outcome", "lost": "rows lost"},
                         empty="")
COUNTS_STYLE = TableStyle(columns={"outcome": "outcome", "cases": "cases"}, empty="")
NO_SWEEP = ("No fault sweep has run on this machine, and this build ran no quick one either (the appendix's step "
            "runs it), so there is no table to show. Run \"make sweep\" (about three minutes on two CPU cores; it "
            "tries every case below in a scratch folder and writes its table where this page reads it), then rebuild "
            "the book.")


def sweep_text(table: pd.DataFrame, meta: dict, *, quick: bool) -> str:
    """Which sweep the table is (the machine's last full sweep, or the quick subset this build ran, whose facts
    say how many cases the full one has and which slow ones it left out), and its counts."""
    c = counts(table)
    failed = ("" if c["failed"] == 0 else
              f" {count_noun(c['failed'], 'case')} FAILED: the program accepted bad input, gave a wrong result or stopped "
              "without saying why; see the rows marked FAILED.")
    when = f"finished {meta.get('finished', 'at an unrecorded time')} after {meta.get('seconds', '?')} s"
    left_out = meta.get("slow_cases", [])
    slow = spoken_list([f'"{name}"' for name in left_out])  # case names hold colons and "and"
    head = (f"This machine has run no full sweep, so this build ran the quick one ({when}): {c['cases']} of the "
            f"{meta.get('all_cases', '?')} cases. The {len(left_out)} slow ones ({slow}) run "
            "with \"make sweep\" (about three minutes), whose table this page then shows instead."
            if quick else f"The last sweep on this machine {when}: {c['cases']} cases.")
    return (f"{head} {c['clear_errors']} clear errors, {c['recovered']} recovered faults and {c['right_results']} "
            f"right results; {count_noun(c['lost'], 'stored row')} lost.{failed}")


def summary_text(table: pd.DataFrame | None, *, quick: bool = False) -> str:
    """The Summary of the appendix, from the sweep's table: it claims only what the shown cases did."""
    if table is None or table.empty:
        return ("This build shows no fault sweep, so it makes no claim about bad input or interrupted runs; "
                "\"make sweep\" runs one and the next build shows its table.")
    c = counts(table)
    good = dict(zip(table["case"], table["outcome"].isin(GOOD_OUTCOMES)))
    which = "this build's quick sweep" if quick else "the last sweep"
    parts = [f"Of {which}'s {count_noun(c['cases'], 'case')}, {c['clear_errors']} bad inputs ended in an error "
             f"naming the file and row or the params key, {c['recovered']} faults were recovered with the table an "
             f"uninterrupted run gives ({count_noun(c['lost'], 'stored row')} lost) and {c['right_results']} gave the "
             "right result"]
    parts[0] += "; none failed." if c["failed"] == 0 else f"; {c['failed']} FAILED (see the rows marked so)."
    checked = [claim for case, claim in (("runs: no network", "the default pipeline made no network connection"),
                                         ("runs: same numbers twice", "the same params gave the same numbers"))
               if good.get(case)]
    if checked:
        parts.append(f"In it, {spoken_list(checked)}.")
    return " ".join(parts)


def report(params: RunParams) -> Report:
    del params  # the appendix shows the machine's last sweep, whatever the run
    out = Report()
    last, quick = read_last_sweep(), False
    if last is None:
        last, quick = read_last_sweep(kind="quick"), True
    if last is None:
        out.add_table("sweep", pd.DataFrame(columns=SWEEP_COLUMNS), SWEEP_STYLE)
        out.add_table("counts", pd.DataFrame(columns=["outcome", "cases"]), COUNTS_STYLE)
        out.values.update({"sweep_text": NO_SWEEP, "n_cases": 0, "summary_text": summary_text(None)})
        return out
    table, meta = last
    out.add_table("sweep", table, SWEEP_STYLE)
    out.add_table("counts", table.groupby("outcome").size().rename("cases").reset_index(), COUNTS_STYLE)
    out.values.update({"n_cases": len(table), "summary_text": summary_text(table, quick=quick),
                       "sweep_text": sweep_text(table, meta, quick=quick)})
    return out
