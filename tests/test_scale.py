"""Every results chapter runs and renders at study scale and beyond: a synthetic release of ten
models made from the released Llama files of the data mirror (same schema and file names as the paper's release), and a
synthetic run of ten models over the whole bank with its rewordings. Charts are rendered to SVG by
vl-convert, as in the book, so a chart that embeds every row (altair's 5,000-row limit) fails here."""

from __future__ import annotations

import importlib
import time

import altair as alt
import pytest
import vl_convert
from biasaudit.run import pipeline
from biasaudit.run.params import validate_params
from biasaudit.run.synthetic import synthetic_release, write_synthetic_run

RESULTS = ["language_drops", "noise_floor", "models", "carry_over", "sources", "dimensions", "faithful", "summed", "agreement",
           "detection", "label_errors", "case_study", "verdict"]
STUDY = {"n_permutations": 20_000, "n_bootstrap": 5_000, "n_runs": 200}  # params/released.yml
TIMINGS: dict[str, float] = {}


def render(report) -> None:
    for name in report.tables:
        shown = report.table(name)
        if shown is not None:  # None: an empty table whose section's prose says why
            shown.to_html() if hasattr(shown, "to_html") else shown.data
    for figure in report.figures.values():
        if isinstance(figure, alt.TopLevelMixin):
            vl_convert.vegalite_to_svg(figure.to_dict())


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mirror_root):
    source = mirror_root / "released"
    folder = tmp_path_factory.mktemp("scale")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIASAUDIT_RUNS_DIR", str(folder / "runs"))
        models = synthetic_release(source, folder / "release")
        release = validate_params({"run_name": "release", "released_scores": str(folder / "release"), "models": [],
                                   **STUDY}, "the scale test")
        own = validate_params({"run_name": "own", "models": [], "released_scores": "", **STUDY}, "the scale test")
        write_synthetic_run("own", own, models)
        pipeline.prepare_run(release)  # imports the release as a run
        yield {"release": release, "own": own}, folder / "runs"
    print("\ntime per chapter at study scale: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items()))


@pytest.mark.mirror("released", "llama3.1-8b_checkpoint.csv", "llama3.1-8b_noise_floor.csv", "label_fix.json")
@pytest.mark.parametrize("run", ["release", "own"])
@pytest.mark.parametrize("chapter", RESULTS)
def test_chapter_runs_and_renders_at_study_scale(runs, run, chapter, monkeypatch):
    params, runs_dir = runs
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(runs_dir))
    started = time.perf_counter()
    if chapter == "label_errors":  # its step first, as its notebook runs it
        pipeline.run_error_reruns(params[run])
    report = importlib.import_module(f"biasaudit.book.chapters.{chapter}").report(params[run])
    render(report)
    TIMINGS[f"{run}/{chapter}"] = time.perf_counter() - started
    if chapter == "language_drops":  # ten models × seven languages, every cell tested
        assert report.tables["cells"]["model"].nunique() == 10 and len(report.tables["cells"]) == 70
