"""The release check (benchmarks/release_check.py): its comparison on a case worked by hand, and its CPU path
end to end on a made-up release with the tiny random model."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from biasaudit.core.paths import PROJECT_ROOT
from biasaudit.data.release_check import release_agreement
from biasaudit.run.synthetic import made_up_release


def table(model: str, rows: list[tuple[str, str, float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"model": model, "item_id": i, "language": lang, "lp_mean_stereotyped": s,
                          "lp_mean_anti_stereotyped": a, "lp_mean_third": t} for i, lang, s, a, t in rows])


def test_the_agreement_of_a_case_worked_by_hand():
    here = table("m", [("a/es", "es", -1, -2, -3), ("b/es", "es", -2, -1, -3), ("c/zh", "zh", -1, -1.5, -2),
                       ("d/zh", "zh", -1, -2, -3)])
    there = table("r", [("a/es", "es", -1.1, -2, -3), ("b/es", "es", -1.5, -1.6, -3), ("c/zh", "zh", -1, -1.5, -2.5),
                        ("e/zh", "zh", -1, -2, -3)])
    got = release_agreement(here, there).set_index("language")
    # es: differences 0.1, 0, 0 and 0.5, 0.6, 0 (b's preference flips: anti here, stereotyped there)
    assert got.loc["es", "versions"] == 2
    assert got.loc["es", "max_abs_diff"] == pytest.approx(0.6)
    assert got.loc["es", "median_abs_diff"] == pytest.approx(0.05)
    assert got.loc["es", "preference_agrees"] == 0.5
    # zh: only c is in both (d and e are not the same version)
    assert got.loc["zh"].tolist() == pytest.approx([1, 0.5, 0.0, 1.0])
    # all nine differences: median 0, largest 0.6; two of three preferences agree
    assert got.loc["all"].tolist() == pytest.approx([3, 0.6, 0.0, 2 / 3])
    with pytest.raises(ValueError, match="compare one with one"):
        release_agreement(pd.concat([here, here.assign(model="n")]), there)


def test_the_release_check_runs_on_a_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path / "runs"))
    release = tmp_path / "release"
    made_up_release(release, ["made-a"], fraction=0.03)
    spec = importlib.util.spec_from_file_location("release_check", PROJECT_ROOT / "benchmarks" / "release_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "check.json"
    result = script.main(["--model", "tiny-random", "--released-model", "made-a", "--released", str(release),
                          "--sample", "2", "--device", "cpu", "--batch-size", "8", "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    rows = pd.DataFrame(result["agreement"]).set_index("language")
    # two bases: the original, seven translations and three rewordings each, less what collapsed
    assert rows.loc["all", "versions"] == result["versions"] <= 2 * 11
    assert set(rows.index) == {"all", "en", "es", "fr", "zh", "ar", "ko", "sw", "hi"}
    assert (rows["max_abs_diff"] >= rows["median_abs_diff"]).all() and rows["preference_agrees"].between(0, 1).all()
    # resumable: a second run reads every score back
    again = script.main(["--model", "tiny-random", "--released-model", "made-a", "--released", str(release),
                         "--sample", "2", "--device", "cpu"])
    assert again["agreement"] == result["agreement"]
