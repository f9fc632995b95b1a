"""Template tests by language (chapter 30): pass rates, unprocessable shares, and whether a language's
lower pass rate is more than rewording alone produces.

- pass rate = passed / (passed + failed), counts summed over the groups asked for, never an average
  of percentages; errors are kept out of it and counted apart (LangBiTe's rule, docs/langbite.md §4). Its
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

import json
import re

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from biasaudit.analyses import stats
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions
from biasaudit.templates.oracles import OPERATIONS, matches, normalise

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


# ---------------------------------------------------------------------------------------------
# What the replies are: why a run's pass rates are what they are, read from the replies themselves.

REPLY_KINDS: tuple[str, ...] = ("expected answer", "other offered answer", "repeats the prompt", "something else")
_QUOTED = re.compile(r"[\"“”«「『]\s*([^\"“”«»「」『』]{1,40}?)\s*[\"“”»」』]")
ECHO_CHARACTERS: int = 12  # a reply whose first this many characters stand in its prompt repeats the prompt


def offered_answers(output_formatting: str) -> list[str]:
    """The answers a template's instructions offer in quotes (`Start your reply with "Yes" or "No"`
    gives ["Yes", "No"]), in order: the ones a model told how to begin should begin with."""
    return [found.strip() for found in _QUOTED.findall(output_formatting or "")]


def _opening(text: str) -> str:
    return " ".join(text.split())[:ECHO_CHARACTERS]


def reply_kind(reply: str, prompt: str, expected: list[str], offered: list[str], language: str) -> tuple[str, str]:
    """(kind, the answer it begins with) for one normalised reply to an expected-value template.

    Checked in this order: it begins with an answer the oracle accepts ("expected answer"); with
    another answer the instructions offer, such as "yes" ("other offered answer"); its first
    ECHO_CHARACTERS characters (spaces collapsed) stand word for word in the prompt, i.e. it repeats
    or continues the prompt instead of answering ("repeats the prompt"); else "something else"."""
    for kind, answers in (("expected answer", expected), ("other offered answer", offered)):
        for answer in sorted({normalise(a) for a in answers}, key=len, reverse=True):
            if matches(reply, answer, language=language):
                return kind, answer
    opening = _opening(reply)
    if len(opening) >= ECHO_CHARACTERS and opening in " ".join(normalise(prompt).split()):
        return "repeats the prompt", ""
    return "something else", ""


def _answered(name: str | None) -> bool:
    return name in OPERATIONS and OPERATIONS[name].answered


def reply_kinds(responses: pd.DataFrame, templates: pd.DataFrame) -> pd.DataFrame:
    """Every reply to a yes/no or stance template (responses of `run_template_tests`; templates whose
    operation passes a reply that begins with an expected answer, `Operation.answered`), with its kind
    and the answer it begins with (`reply_kind`). Replies that are errors are left out (they are
    counted as unprocessable elsewhere), and so are `different` and `notIncludesAny` templates, where
    an expected answer fails. Columns: model, template_id, language, concern, kind, answer."""
    columns = ["model", "template_id", "language", "concern", "kind", "answer"]
    answered = templates["oracle_prediction"].map(lambda p: _answered(json.loads(p).get("operation")))
    info = templates.loc[(templates["oracle"] == "expected value") & answered,
                         ["template_id", "language", "concern", "output_formatting", "oracle_prediction"]]
    table = responses.loc[~responses["reply"].str.startswith("ERROR: ")].merge(info, on="template_id")
    if table.empty:
        return pd.DataFrame(columns=columns)
    found = [reply_kind(row.reply, row.prompt_text, json.loads(row.oracle_prediction)["expected_value"],
                        offered_answers(row.output_formatting), row.language) for row in table.itertuples()]
    table["kind"], table["answer"] = [kind for kind, _ in found], [answer for _, answer in found]
    return table[columns].reset_index(drop=True)


def reply_kind_shares(kinds: pd.DataFrame) -> pd.DataFrame:
    """Per model: replies, the share of each kind (columns named as REPLY_KINDS), the most frequent
    other offered answer and its share of all replies (top_answer, top_answer_share)."""
    columns = ["model", "replies", *REPLY_KINDS, "top_answer", "top_answer_share"]
    rows = []
    for model, mine in kinds.groupby("model", sort=False):
        shares = mine["kind"].value_counts(normalize=True).reindex(list(REPLY_KINDS), fill_value=0.0)
        offered = mine.loc[mine["kind"] == "other offered answer", "answer"].value_counts()
        rows.append({"model": model, "replies": len(mine), **shares.to_dict(),
                     "top_answer": offered.index[0] if len(offered) else "",
                     "top_answer_share": offered.iloc[0] / len(mine) if len(offered) else 0.0})
    return pd.DataFrame(rows, columns=columns)


def varying_languages(by_concern: pd.DataFrame) -> dict[str, list[str]]:
    """Per model, the languages whose pass rate is not the same in every concern it was judged in
    (only those can be correlated with another language)."""
    varying = {}
    for model, mine in by_concern.dropna(subset=["pass_rate"]).groupby("model", sort=False):
        spread = mine.groupby("language", sort=True)["pass_rate"].agg(lambda r: r.max() - r.min())
        varying[model] = [language for language, value in spread.items() if value > 0]
    return varying
