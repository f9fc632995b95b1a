"""Analyses on small hand-built scores tables with answers worked out by hand or by scipy/statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biasaudit import analyses
from biasaudit.analyses.stats import sign_flip_pvalue
from biasaudit.core.options import StudyOptions
from conftest import score_row
from scipy import stats as sps
from scipy.special import expit, logit
from statsmodels.stats.multitest import multipletests


def scores_from_soft(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    """(model, base_id, language, soft) rows → a scores table whose contrast gives exactly that soft score."""
    return pd.DataFrame([score_row(model, base, language, soft, category="trait") for model, base, language, soft in rows])


def test_item_scores_soft_binary_strength_fluency():
    table = scores_from_soft([("m", "a", "en", 0.8), ("m", "b", "en", 0.5), ("m", "c", "en", 0.3)])
    table.loc[2, "third_kind"] = "unknown"
    scored = analyses.item_scores(table)
    np.testing.assert_allclose(scored["soft"], [0.8, 0.5, 0.3])
    # the paper's rule: a tie (soft 0.5) is not a stereotyped choice; it is marked as a tie
    assert scored["binary"].tolist() == [1.0, 0.0, 0.0] and scored["tie"].tolist() == [False, True, False]
    np.testing.assert_allclose(scored["strength"], [0.3, 0.0, 0.2])
    np.testing.assert_allclose(scored["fluency"][:2], [expit(3.0), expit(3.0)])
    assert np.isnan(scored["fluency"][2]), "fluency only where the third option is unrelated"
    summed = analyses.item_scores(table, aggregate="sum")
    np.testing.assert_allclose(summed["soft"][0], expit(2 * logit(0.8)))


def test_sum_aggregate_needs_sums():
    table = scores_from_soft([("m", "a", "en", 0.8)]).assign(lp_sum_stereotyped=np.nan)
    with pytest.raises(ValueError, match="per-token means"):
        analyses.item_scores(table, aggregate="sum")


@pytest.fixture
def two_models() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    rows = []
    for model, shift in (("m1", 0.10), ("m2", 0.02)):
        english = rng.uniform(0.4, 0.9, size=12)
        for i, soft in enumerate(english):
            rows.append((model, f"b{i:02d}", "en", soft))
            rows.append((model, f"b{i:02d}", "sw", float(np.clip(soft - shift + rng.normal(0, 0.05), 0.01, 0.99))))
            if i < 10:  # two base items have no French version: pairing must skip them
                rows.append((model, f"b{i:02d}", "fr", float(np.clip(soft + rng.normal(0, 0.05), 0.01, 0.99))))
    return scores_from_soft(rows)


def test_cell_tests_pair_items_and_correct_over_all_cells(two_models):
    cells = analyses.cell_tests(two_models, options=StudyOptions(n_permutations=2000, seed=1))
    assert len(cells) == 4 and set(cells["n"]) == {12, 10}
    scored = analyses.item_scores(two_models)
    for row in cells.itertuples():
        en = scored[(scored.model == row.model) & (scored.language == "en")].set_index("base_id")["soft"]
        other = scored[(scored.model == row.model) & (scored.language == row.language)].set_index("base_id")["soft"]
        differences = (other - en.loc[other.index]).to_numpy()
        assert row.drop == pytest.approx(-differences.mean())
        exact = sign_flip_pvalue(differences, rng=np.random.default_rng(0), exact_below=16)
        assert row.p == pytest.approx(exact), "n <= 16: exact enumeration"
    np.testing.assert_allclose(cells["q"], multipletests(cells["p"], method="fdr_bh")[1])
    m1_sw = cells[(cells.model == "m1") & (cells.language == "sw")].iloc[0]
    assert m1_sw["drop"] > 0.05 and m1_sw["reliable"]


def test_language_drops_by_hand(two_models):
    drops = analyses.language_drops(two_models, options=StudyOptions(n_permutations=2000, seed=1)).set_index("language")
    scored = analyses.item_scores(two_models)
    pairs = analyses.paired_with_english(scored)
    sw = pairs[pairs.language == "sw"]
    per_model = sw.groupby("model").apply(lambda g: (g.soft_en - g.soft).mean())
    # Two models are too few to be an interval's units: the interval is over items, a percentile bootstrap
    # of each item's drop averaged over the models (the verdict's, chapter 22), about mean ± 1.96 SE.
    items = (sw.soft_en - sw.soft).groupby(sw.base_id).mean()
    assert drops.loc["sw", "basis"] == "over items"
    assert drops.loc["sw", "drop"] == pytest.approx(items.mean()) == pytest.approx(per_model.mean())
    low, high = drops.loc["sw", "drop_low"], drops.loc["sw", "drop_high"]
    assert low < items.mean() < high
    assert high - low == pytest.approx(2 * 1.96 * items.std(ddof=0) / np.sqrt(len(items)), rel=0.35)
    # The paper's carry-over slope: one least-squares line through the items of both models as they are.
    x, y = sw.soft_en - sw.soft_en.mean(), sw.soft - sw.soft.mean()
    assert drops.loc["sw", "slope"] == pytest.approx((x * y).sum() / (x * x).sum())
    per_model = [np.polyfit(g.soft_en, g.soft, 1)[0] for _, g in sw.groupby("model")]
    assert abs(drops.loc["sw", "slope"] - np.mean(per_model)) > 1e-6, "the case tells pooling from averaging"
    assert drops.loc["sw", "same_choice"] == pytest.approx((sw.binary == sw.binary_en).mean())
    assert drops.loc["en", "drop"] == 0 and drops.loc["fr", "n_items"] == 10
    assert drops.loc["sw", "reliable_drops"] >= 1

