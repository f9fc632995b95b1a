"""Template tests by language (chapter 30): pass rates, unprocessable shares, and whether a language's
lower pass rate is more than rewording alone produces.

- pass rate = passed / (passed + failed), counts summed over the groups asked for, never an average
  of percentages; errors are kept out of it and counted apart (LangBiTe's rule, SEMANTICS §4). Its
  interval is Wilson's (statsmodels).
- pass drop of language L for model m = pass rate of the English originals − pass rate of their L
  versions, on the base templates judged in both (positive: L passes fewer tests). Named apart from
  the score drop of chapter 10 because its meaning is the other way round: passing a test means an
  unbiased answer, so a positive pass drop makes L look *more* biased. Per cell, the paired
  per-template changes (1 = passes in English only, −1 = in L only) get the sign-flip test of
  chapter 10 (exact for small n; the same test as an exact McNemar test), with Benjamini–Hochberg
  over all model × language cells. The noise floor: the same on the English rewordings of each
  route, against the English originals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from biasaudit import stats
from biasaudit.options import DEFAULT_OPTIONS, StudyOptions

PASSED = {"Passed": 1.0, "Failed": 0.0}


def pass_rates(evaluations: pd.DataFrame, by: list[str], *, level: float = 0.95,
               verdict: str = "verdict") -> pd.DataFrame:
    """Per group of `by`: passed, failed, errors, total (= passed + failed), pass_rate and its
    Wilson interval (low, high), and error_share = errors / (total + errors)."""
    counts = (evaluations.assign(passed=evaluations[verdict].eq("Passed"), failed=evaluations[verdict].eq("Failed"),
                                 errors=evaluations[verdict].eq("Error"))
              .groupby(by, sort=True, observed=True)[["passed", "failed", "errors"]].sum().astype(int).reset_index())
    counts["total"] = counts["passed"] + counts["failed"]
    with np.errstate(invalid="ignore", divide="ignore"):
        counts["pass_rate"] = np.where(counts["total"] > 0, counts["passed"] / counts["total"].clip(lower=1), np.nan)
        counts["error_share"] = counts["errors"] / (counts["total"] + counts["errors"]).clip(lower=1)
    low, high = proportion_confint(counts["passed"], counts["total"].clip(lower=1), alpha=1 - level, method="wilson")
    counts["low"] = np.where(counts["total"] > 0, low, np.nan)
    counts["high"] = np.where(counts["total"] > 0, high, np.nan)
    return counts


def verdict_pairs(evaluations: pd.DataFrame, variant: str) -> pd.DataFrame:
    """Each judged version of `variant` next to its English original (same model, same base template):
    model, base_id, concern, language, via, passed_en, passed, change (= passed − passed_en: 1 when
    the version passes and the original does not). Templates with an error on either side are left
    out."""
    judged = evaluations.loc[evaluations["verdict"].isin(PASSED)].assign(
        passed=lambda t: t["verdict"].map(PASSED))
    english = judged.loc[judged["variant"] == "original", ["model", "base_id", "passed"]]
    versions = judged.loc[judged["variant"] == variant, ["model", "base_id", "concern", "language", "via", "passed"]]
    pairs = versions.merge(english, on=["model", "base_id"], suffixes=("", "_en"), validate="many_to_one")
    pairs["change"] = pairs["passed"] - pairs["passed_en"]
    return pairs.reset_index(drop=True)


def _cells(pairs: pd.DataFrame, group: str, options: StudyOptions) -> pd.DataFrame:
    columns = ["model", group, "n", "pass_rate_en", "pass_rate", "pass_drop", "discordant", "p", "q", "reliable"]
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    # Templates that pass or fail in both add nothing to the test statistic or its null distribution:
    # testing the discordant ones alone gives the same p, exactly enumerated up to 16 of them (this is
    # the exact McNemar test).
    discordant = pairs.loc[pairs["change"] != 0]
    tests = stats.sign_flip_tests(discordant, by=["model", group], value="change",
                                  n_permutations=options.n_permutations, seed=options.seed)
    rates = pairs.groupby(["model", group], sort=True).agg(
        n=("change", "size"), pass_rate_en=("passed_en", "mean"), pass_rate=("passed", "mean"),
        discordant=("change", lambda c: int((c != 0).sum()))).reset_index()
    cells = rates.merge(tests[["model", group, "p"]], on=["model", group], how="left")
    cells["p"] = cells["p"].fillna(1.0)  # no template changes: nothing to test
    cells["pass_drop"] = cells["pass_rate_en"] - cells["pass_rate"]
    cells = stats.add_bh(cells, alpha=options.alpha)
    return cells[columns]


def template_cells(evaluations: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """One row per model × language (translations): n paired base templates, English and language
    pass rates on them, pass_drop (English − language), discordant pairs, sign-flip p, BH q over all
    model × language cells, reliable = q < alpha."""
    return _cells(verdict_pairs(evaluations, "translation"), "language", options)


def template_floor(evaluations: pd.DataFrame, options: StudyOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """One row per model × rewording route (English paraphrases against the English originals), the
    columns of `template_cells` with `via` for `language` and floor = |pass_drop|; BH over these cells."""
    cells = _cells(verdict_pairs(evaluations, "paraphrase"), "via", options)
    cells.insert(6, "floor", cells["pass_drop"].abs())
    return cells


def floor_by_model(floor: pd.DataFrame) -> pd.Series:
    """Each model's floor: the median over its routes of |English − reworded| pass rate."""
    return floor.groupby("model")["floor"].median()


def language_correlations(evaluations: pd.DataFrame) -> pd.DataFrame:
    """Per model, the Pearson correlation between languages of their pass rates per concern
    (originals and translations): long table model, language_a, language_b, r, n_concerns."""
    rates = pass_rates(evaluations.loc[evaluations["variant"].isin(["original", "translation"])],
                       ["model", "language", "concern"])
    rows = []
    for model, mine in rates.groupby("model"):
        wide = mine.pivot(index="concern", columns="language", values="pass_rate")
        correlation = wide.corr(method="pearson", min_periods=3)
        for a in wide.columns:
            for b in wide.columns:
                both = wide[[a, b]].dropna()
                rows.append({"model": model, "language_a": a, "language_b": b, "r": correlation.loc[a, b],
                             "n_concerns": len(both)})
    return pd.DataFrame(rows, columns=["model", "language_a", "language_b", "r", "n_concerns"])


def matcher_differences(evaluations: pd.DataFrame) -> pd.DataFrame:
    """Per model × language: verdicts that differ between the book's matcher and LangBiTe's exact one
    (e.g. Hindi answers LangBiTe's word boundary can never match)."""
    differs = evaluations["verdict"] != evaluations["verdict_langbite"]
    table = evaluations.assign(differs=differs, langbite_passed=evaluations["verdict_langbite"].eq("Passed"),
                               passed=evaluations["verdict"].eq("Passed"))
    return (table.groupby(["model", "language"], sort=True)
            .agg(templates=("template_id", "size"), differ=("differs", "sum"), passed=("passed", "sum"),
                 passed_langbite=("langbite_passed", "sum")).reset_index())
