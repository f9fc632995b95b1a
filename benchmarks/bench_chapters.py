"""Time every results chapter at study scale and beyond (what `make book` costs per chapter there).

Three synthetic runs, each with ten models: the paper's release (made from the released Llama files of a data folder,
same schema, ~3,100 versions per model), this project's bank with rewordings (832 versions per
model), and the bank plus every StereoSet and BBQ item of the mirror in English (~11,700 versions
per model: a paper.yml-sized run). Settings are params/released.yml's (20,000 permutations, 5,000
bootstrap draws, 200 detection runs). Each chapter is timed cold (results not yet stored) and warm.

    python benchmarks/bench_chapters.py [--data $BIASAUDIT_DATA_DIR]   (layout: docs/data.md)
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile
import time
from pathlib import Path

from biasaudit.run.params import validate_params
from biasaudit.run.synthetic import synthetic_release, write_synthetic_run

CHAPTERS = ["language_drops", "noise_floor", "models", "carry_over", "sources", "dimensions", "faithful", "summed", "agreement",
            "detection", "label_errors", "case_study"]
STUDY = {"n_permutations": 20_000, "n_bootstrap": 5_000, "n_runs": 200}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("BIASAUDIT_DATA_DIR", ""),
                        help="data folder with released/ (docs/data.md); default $BIASAUDIT_DATA_DIR")
    args = parser.parse_args()
    if not args.data:
        parser.error("give --data or set BIASAUDIT_DATA_DIR to a folder holding released/ (docs/data.md)")
    data = Path(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["BIASAUDIT_RUNS_DIR"] = str(Path(tmp) / "runs")
        models = synthetic_release(data / "released", Path(tmp) / "release")
        runs = {
            "release": validate_params({"run_name": "release", "released_scores": str(Path(tmp) / "release"),
                                        "models": [], **STUDY}, "bench"),
            "bank": validate_params({"run_name": "bank", "models": [], **STUDY}, "bench"),
            "bank+sources": validate_params({"run_name": "sources", "models": [], "sources": ["stereoset", "bbq"],
                                             "data_dir": str(data), "stereoset_per_category": 0,
                                             "bbq_per_category": 0, **STUDY}, "bench"),
        }
        from biasaudit.run.pipeline import prepare_run, run_error_reruns

        prepare_run(runs["release"])
        write_synthetic_run("bank", runs["bank"], models)
        write_synthetic_run("sources", runs["bank+sources"], models)
        from biasaudit.run.pipeline import read_scores

        print(f"{'chapter':<14s}" + "".join(f"{name:>22s}" for name in runs))
        print(f"{'rows':<14s}" + "".join(f"{len(read_scores(p.run_name)):>22,d}" for p in runs.values()))
        totals = {name: [0.0, 0.0] for name in runs}
        for chapter in CHAPTERS:
            module = importlib.import_module(f"biasaudit.book.chapters.{chapter}")
            cells = []
            for name, params in runs.items():
                times = []
                for _ in range(2):  # cold, then warm (stored results read back)
                    started = time.perf_counter()
                    if chapter == "label_errors":  # its step first, as its notebook runs it
                        run_error_reruns(params)
                    report = module.report(params)
                    for figure in report.figures.values():
                        if hasattr(figure, "to_dict"):
                            figure.to_dict()
                    times.append(time.perf_counter() - started)
                totals[name][0] += times[0]
                totals[name][1] += times[1]
                cells.append(f"{times[0]:8.1f} s / {times[1]:5.1f} s")
            print(f"{chapter:<14s}" + "".join(f"{c:>22s}" for c in cells))
        print(f"{'all':<14s}" + "".join(f"{t[0]:8.1f} s / {t[1]:5.1f} s".rjust(22) for t in totals.values()))
        print("(cold / warm: a warm chapter reads the cell tests, bootstraps and detection runs stored by the first)")


if __name__ == "__main__":
    main()
