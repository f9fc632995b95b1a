"""The language verdict (chapter 22), branch by branch; the paper's own published numbers; the power of
the test at a cell's own scatter against the normal approximation; and the verdicts of synthetic studies
whose truth is known, one of them the paper's ten-model study rebuilt from its released per-cell numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.analyses import verdict as v
from biasaudit.analyses.floor import model_floors
from biasaudit.core.options import StudyOptions
from conftest import score_row
from scipy.stats import norm

LARGEST, TYPICAL = 0.0133, 0.0075


@pytest.mark.parametrize("low, high, expected", [
    (0.0216, 0.0383, v.REAL),  # wholly above every floor
    (-0.05, -0.02, v.REAL),  # a rise beyond every floor is a real shift too
    (0.0133, 0.03, v.BEYOND_TYPICAL),  # at the largest floor is not beyond it
    (0.0121, 0.0270, v.BEYOND_TYPICAL),  # beyond the typical floor, reaching inside the largest
    (-0.03, -0.008, v.BEYOND_TYPICAL),
    (0.0025, 0.0108, v.NOISE),  # wholly inside ± the largest floor
    (-0.0133, 0.0133, v.NOISE),  # at the largest floor is inside
    (-0.004, 0.002, v.NOISE),
    (0.005, 0.03, v.UNCLEAR),  # reaches inside the typical floor and beyond the largest
    (-0.02, 0.02, v.UNCLEAR),  # straddles zero and both floors
    (0.0075, 0.02, v.UNCLEAR),  # at the typical floor is not beyond it
    (np.nan, np.nan, v.UNCLEAR),  # no interval
])
def test_language_verdict(low, high, expected):
    assert v.language_verdict(low, high, largest_floor=LARGEST, typical_floor=TYPICAL) == expected


def test_a_language_verdict_needs_floors_and_a_proper_interval():
    assert v.language_verdict(0.02, 0.03, largest_floor=np.nan, typical_floor=np.nan) == v.NO_FLOOR
    with pytest.raises(ValueError, match="cannot exceed"):
        v.language_verdict(0.02, 0.03, largest_floor=0.01, typical_floor=0.02)
    with pytest.raises(ValueError, match="low end"):
        v.language_verdict(0.03, 0.02, largest_floor=LARGEST, typical_floor=TYPICAL)


def test_one_floor_leaves_no_middle_verdict():
    # One model: the typical and the largest floor are one, so nothing is "beyond the typical, not clearly".
    verdicts = {v.language_verdict(low, low + 0.01, largest_floor=0.01, typical_floor=0.01)
                for low in np.linspace(-0.05, 0.05, 41)}
    assert v.BEYOND_TYPICAL not in verdicts and verdicts == {v.REAL, v.NOISE, v.UNCLEAR}


@pytest.mark.parametrize("verdict, words", [
    (v.REAL, "lies beyond every model's floor (largest 0.0133)"), (v.NOISE, "lies inside ± the largest floor (0.0133)"),
    (v.BEYOND_TYPICAL, "lies beyond the typical floor (0.0075) but reaches inside the largest (0.0133)"),
    (v.UNCLEAR, "reaches inside the typical floor (0.0075) and beyond the largest (0.0133)")])
def test_each_verdict_says_its_condition(verdict, words):
    reason = v.verdict_reason(verdict, 0.01, 0.02, largest_floor=LARGEST, typical_floor=TYPICAL)
    assert reason == f"[0.0100, 0.0200] {words}"
    assert v.verdict_reason(v.UNCLEAR, np.nan, np.nan, largest_floor=LARGEST, typical_floor=TYPICAL).startswith(
        "no interval")
    with pytest.raises(ValueError):
        v.verdict_reason("models disagree", 0.0, 0.1, largest_floor=LARGEST, typical_floor=TYPICAL)


# The paper's own published numbers (results/reanalysis/paper_numbers.json of its release, also in the data
# mirror): per language the mean drop over its ten models with a 95% interval across them (its
# `gap_by_language`, mean_d = translated − English, so the drop's interval is [−hi, −lo]), and the range and
# median of the models' noise floors (`floor.floor_range`, `floor.median_floor`). The paper concludes
# that for Hindi, Korean and Swahili, and no other language, the drop clearly exceeds what rewording produces.
PAPER_INTERVALS = {"es": (-0.0108, -0.0025), "fr": (-0.0208, -0.0123), "zh": (-0.0271, -0.0116),
                   "ar": (-0.027, -0.0121), "ko": (-0.0346, -0.0164), "hi": (-0.0383, -0.0216),
                   "sw": (-0.0412, -0.0166)}
PAPER_FLOOR_RANGE, PAPER_MEDIAN_FLOOR = (0.001057978094782277, 0.013322744238180683), 0.0075004236061710725
EXPECTED_ON_THE_PAPER = {"hi": v.REAL, "ko": v.REAL, "sw": v.REAL, "es": v.NOISE,
                         "ar": v.BEYOND_TYPICAL, "fr": v.BEYOND_TYPICAL, "zh": v.BEYOND_TYPICAL}


def test_the_rule_on_the_papers_published_numbers():
    verdicts = {language: v.language_verdict(-hi, -lo, largest_floor=PAPER_FLOOR_RANGE[1],
                                             typical_floor=PAPER_MEDIAN_FLOOR)
                for language, (lo, hi) in PAPER_INTERVALS.items()}
    assert verdicts == EXPECTED_ON_THE_PAPER
    assert {c for c, verdict in verdicts.items() if verdict == v.REAL} == {"hi", "ko", "sw"}


def test_the_interval_is_across_models_from_five_models():
    options = StudyOptions(n_bootstrap=400, seed=3)
    items = np.random.default_rng(0).normal(0.02, 0.1, size=200)
    basis, drop, low, high, low_se, high_se = v.language_interval(np.array([0.01, 0.02, 0.03, 0.02, 0.02]), items,
                                                                  options, key=("x",))
    mean, t_low, t_high = 0.02, 0.02 - 2.776445 * np.sqrt(0.00005 / 5), 0.02 + 2.776445 * np.sqrt(0.00005 / 5)
    assert basis == v.ACROSS_MODELS and drop == pytest.approx(mean)
    assert (low, high) == pytest.approx((t_low, t_high), abs=1e-6)  # t(0.975, 4) = 2.776445, SD² = 0.00005
    assert (low_se, high_se) == (0.0, 0.0), "a t interval has no Monte Carlo error"
    basis, drop, low, high, low_se, high_se = v.language_interval(np.array([0.01, 0.03]), items, options, key=("x",))
    assert basis == v.OVER_ITEMS and drop == pytest.approx(items.mean())
    # the Monte Carlo error of a bootstrap end: about sqrt(p(1 − p) / B) / density at the end, here with
    # the normal shape of the mean's bootstrap distribution (SD = the items' SE)
    se = items.std() / np.sqrt(200)
    expected = np.sqrt(0.025 * 0.975 / 400) / norm.pdf(1.96) * se
    assert 0.4 * expected < low_se < 2.5 * expected and 0.4 * expected < high_se < 2.5 * expected
    assert low < items.mean() < high and high - low == pytest.approx(2 * 1.96 * items.std() / np.sqrt(200), rel=0.25)
    # a model without the language does not count towards the five
    assert v.language_interval(np.array([0.01, 0.02, 0.03, 0.02, np.nan]), items, options, key=("x",))[0] == v.OVER_ITEMS


@pytest.mark.parametrize("drop, reliable, floor, power, expected", [
    (0.005, True, 0.01, 1.0, v.WITHIN_FLOOR),  # reliable, but no larger than rewording moves the scores
    (-0.008, False, 0.01, 0.1, v.WITHIN_FLOOR),
    (0.05, True, 0.01, 0.2, v.RELIABLE),
    (-0.05, True, 0.01, 0.2, v.RELIABLE),
    (0.05, False, 0.01, 0.3, v.LOW_POWER),
    (0.05, False, 0.01, 0.95, v.NOT_RELIABLE),
    (0.05, False, np.nan, np.nan, v.LOW_POWER),  # no floor and no power known
])
def test_cell_evidence(drop, reliable, floor, power, expected):
    assert v.cell_evidence(drop=drop, reliable=reliable, floor=floor, power=power) == expected


def test_power_matches_the_normal_approximation():
    rng = np.random.default_rng(3)
    n, sd, shift = 100, 0.2, 0.05
    changes = rng.normal(0.0, sd, size=n)
    changes = (changes - changes.mean()) / changes.std(ddof=1) * sd  # exactly this scatter
    options = StudyOptions(n_permutations=2000, seed=1)
    power = v.cell_power(changes, shift, np.array([]), options, n_runs=400, key=("m", "xx"))
    expected = norm.cdf(shift * np.sqrt(n) / sd - norm.ppf(0.975))  # two-sided z-test at 0.05: 0.705
    assert power == pytest.approx(expected, abs=0.07)
    assert v.cell_power(changes, 0.0, np.array([]), options, n_runs=400, key=("m", "xx")) < 0.1
    assert v.cell_power(changes, 0.15, np.array([]), options, n_runs=100, key=("m", "xx")) == 1.0
    # other cells in the family make the correction stricter: lower power
    crowded = v.cell_power(changes, shift, np.full(20, 0.9), options, n_runs=400, key=("m", "xx"))
    assert crowded < power


def test_verdicts_of_a_study_whose_truth_is_known():
    rng = np.random.default_rng(11)
    rows = []
    for model in ("m1", "m2"):
        for i in range(120):
            english = float(rng.uniform(0.3, 0.8))
            rows.append(score_row(model, f"b{i}", "en", english))
            # rewording moves every item a little (scatter 0.02) and each route shifts the mean by about 0.01
            for route, shift in (("human-1", 0.01), ("human-2", -0.008)):
                rows.append(score_row(model, f"b{i}", "en",
                                      float(np.clip(english + shift + rng.normal(0, 0.02), 0.01, 0.99)),
                                      variant="rewording", via=route))
            # es: a real drop of 0.12; fr: no shift at all, small scatter; sw: no shift, huge scatter
            for language, shift, sd in (("es", 0.12, 0.05), ("fr", 0.0, 0.01), ("sw", 0.0, 0.3)):
                rows.append(score_row(model, f"b{i}", language,
                                      float(np.clip(english - shift + rng.normal(0, sd), 0.01, 0.99))))
    scores = pd.DataFrame(rows)
    options = StudyOptions(n_permutations=1000, n_bootstrap=200, seed=2)
    cells = analyses.cell_tests(scores, options)
    floors = analyses.floor_cells(scores, options)
    languages = v.verdict_languages(scores, options, cells=cells, floors=floors).set_index("language")
    assert set(languages["basis"]) == {v.OVER_ITEMS}  # two models
    assert languages.loc["es", "verdict"] == v.REAL and languages.loc["fr", "verdict"] == v.NOISE
    assert languages.loc["sw", "verdict"] == v.UNCLEAR  # a scatter of 0.3 over 120 items cannot tell
    es = languages.loc["es"]
    assert es["low"] < 0.12 < es["high"], "the interval covers the true drop"
    table = v.verdict_cells(scores, options, cells=cells, floors=floors, n_runs=100)
    evidence = v.language_evidence(table, scores, options).set_index("language")
    assert evidence.loc["es", "reliable_models"] == 2 and evidence.loc["es", "above_floor_models"] == 2
    assert (table.loc[table["language"] == "sw", "power"] < evidence.loc["es", "power"]).all()
    assert set(table.loc[table["language"] == "es", "evidence"]) == {v.RELIABLE}


def _ten_model_study(cell_tests: pd.DataFrame, floor_tests: pd.DataFrame) -> pd.DataFrame:
    """A scores table whose every model × language cell and model × pivot cell has exactly the paper's
    n and mean change (mean_d), items scattering by ± the paper's sigma_d around it."""
    rows = []

    def versions(model: str, language: str, n: int, mean_d: float, sigma_d: float, variant: str, via: str) -> None:
        signs = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        signs[-1] = 0.0 if n % 2 else signs[-1]  # an odd count keeps its mean exact
        for i, sign in enumerate(signs):
            rows.append(score_row(model, f"b{i:03d}", language, 0.5 + mean_d + sign * sigma_d,
                                  variant=variant, via=via))

    for model in cell_tests["model"].unique():
        for i in range(int(cell_tests["n"].max())):
            rows.append(score_row(model, f"b{i:03d}", "en", 0.5))
    for cell in cell_tests.itertuples():
        versions(cell.model, "zh" if cell.language == "zh-CN" else cell.language, int(cell.n), cell.mean_d,
                 cell.sigma_d, "translation", "released")
    for cell in floor_tests.itertuples():
        versions(cell.model, "en", int(cell.n), cell.mean_d, cell.sigma_d, "rewording", cell.pivot)
    return pd.DataFrame(rows)


@pytest.mark.mirror("released", "cell_tests.csv", "floor_tests.csv", "paper_numbers.json")
def test_the_papers_ten_model_study_gives_the_papers_conclusion(mirror):
    """The ten released models' per-cell numbers (the paper's cell_tests.csv and floor_tests.csv) rebuilt as
    item scores at the study's size (10 models × 7 languages × ~360 items, 3 rewording routes): the floors,
    the intervals across models and the verdicts come out as the paper's own summary gives them."""
    import json

    folder = mirror
    cell_tests, floor_tests = pd.read_csv(folder / "cell_tests.csv"), pd.read_csv(folder / "floor_tests.csv")
    numbers = json.loads((folder / "paper_numbers.json").read_text(encoding="utf-8"))
    scores = _ten_model_study(cell_tests, floor_tests)
    options = StudyOptions(n_permutations=200, n_bootstrap=200, seed=5)
    cells, floors = analyses.cell_tests(scores, options), analyses.floor_cells(scores, options)
    assert model_floors(floors).agg(["min", "max", "median"]).to_numpy() == pytest.approx(
        [*numbers["floor"]["floor_range"], numbers["floor"]["median_floor"]], abs=1e-9)
    languages = v.verdict_languages(scores, options, cells=cells, floors=floors).set_index("language")
    assert set(languages["basis"]) == {v.ACROSS_MODELS}
    for language, row in languages.iterrows():
        paper = numbers["gap_by_language"]["zh-CN" if language == "zh" else language]
        assert (-row["high"], -row["low"]) == pytest.approx((paper["lo"], paper["hi"]), abs=1e-4)  # 4 decimals
    assert languages["verdict"].to_dict() == EXPECTED_ON_THE_PAPER


def test_an_interval_end_within_its_monte_carlo_error_of_a_floor_is_at_the_boundary():
    # the low end 0.0155 sits on the largest floor 0.0155: which side depends on the draws
    verdict, possible = v.settled_verdict(0.0155, 0.0944, largest_floor=0.0155, typical_floor=0.008, low_se=0.0004,
                                          high_se=0.0004)
    assert verdict == v.BOUNDARY and possible == [v.REAL, v.BEYOND_TYPICAL]
    reason = v.verdict_reason(verdict, 0.0155, 0.0944, largest_floor=0.0155, typical_floor=0.008, possible=possible)
    assert reason.endswith("other draws could give real shift or beyond the typical floor, not clearly")
    # far from every floor, or without Monte Carlo error (a t interval), the rule's verdict stands
    assert v.settled_verdict(0.03, 0.09, largest_floor=0.0155, typical_floor=0.008, low_se=0.0004,
                             high_se=0.0004) == (v.REAL, [v.REAL])
    assert v.settled_verdict(0.0155, 0.0944, largest_floor=0.0155, typical_floor=0.008)[0] == v.BEYOND_TYPICAL


def test_the_verdict_and_chapter_10_give_one_interval_and_seeds_do_not_flip_a_verdict():
    from pathlib import Path

    from biasaudit.analyses.drops import cell_tests, language_drops
    from biasaudit.analyses.floor import floor_cells
    from biasaudit.data.item_table import read_items
    from biasaudit.run.synthetic import synthetic_scores

    items = read_items(Path(__file__).resolve().parents[1] / "data" / "items" / "written.csv")
    scores = synthetic_scores(items, ["m1", "m2"], seed=4)
    verdicts = []
    for seed in range(5):
        options = StudyOptions(n_permutations=300, n_bootstrap=2000, seed=seed)
        cells = cell_tests(scores, options)
        drops = language_drops(scores, options, cells=cells)
        table = v.verdict_languages(scores, options, cells=cells, floors=floor_cells(scores, options), drops=drops)
        # one interval: the verdict's is chapter 10's, number for number
        merged = table.merge(drops, on="language")
        assert np.allclose(merged[["low", "high"]].to_numpy(), merged[["drop_low", "drop_high"]].to_numpy())
        verdicts.append(table.set_index("language")["verdict"])
    seeds = pd.concat(verdicts, axis=1)
    flipped = seeds.loc[seeds.nunique(axis=1) > 1]
    # a verdict that another seed changes is marked at the boundary by at least one of them, never two
    # different verdicts both given as settled
    for language, row in flipped.iterrows():
        settled = {verdict for verdict in row if verdict != v.BOUNDARY}
        assert len(settled) <= 1, (language, row.tolist())
