"""`python -m biasaudit.sweep`: run the fault sweep and print its table (`--only`, `--list`); with
`worker <name> ...`, run one of the harness's worker processes."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

import pandas as pd

from biasaudit.core.sweep_record import counts, write_sweep
from biasaudit.sweep.cases import CASES, SLOW_CASES, run_sweep
from biasaudit.sweep.harness import WORKERS


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
    path = write_sweep(table, time.perf_counter() - started, all_cases=len(CASES), slow_cases=SLOW_CASES)
    with pd.option_context("display.max_colwidth", 90, "display.width", 250):
        print(table[["case", "outcome", "lost", "said"]].to_string(index=False))
    c = counts(table)
    print(f"\n{c['cases']} cases: {c['clear_errors']} clear errors, {c['recovered']} recovered faults, "
          f"{c['right_results']} right results, {c['failed']} failed; {c['lost']} stored rows lost. Table: {path}")
    return 0 if c["failed"] == 0 and c["lost"] == 0 else 1


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
