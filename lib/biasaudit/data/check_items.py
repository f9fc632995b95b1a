"""Check an item bank: `python -m biasaudit.data.check_items [FILE ...]` (the `make check-items` target).

Runs the row contract (a bad row stops the load, naming file, row and field), then the bank
checks of `items.bank_problems`. Exits 1 when any error is found; collapsed contrasts are
listed and counted but are not errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

from biasaudit.data.item_table import DEFAULT_BANK, ItemError, bank_problems, read_items


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or [DEFAULT_BANK]
    failed = False
    for path in paths:
        try:
            items = read_items(path)
        except ItemError as err:
            print(err, file=sys.stderr)
            failed = True
            continue
        problems = bank_problems(items, origin=str(path))
        for problem in problems.itertuples(index=False):
            print(f"{problem.origin}: row {problem.row}, field {problem.field!r}: {problem.problem} [{problem.severity}]")
        errors = int((problems["severity"] == "error").sum())
        collapsed = int((problems["severity"] == "collapsed").sum())
        originals = items.loc[items["variant"] == "original"]
        print(f"{path}: {len(originals)} base items, {len(items)} versions, {errors} error(s), "
              f"{collapsed} collapsed contrast(s)")
        failed |= errors > 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
