"""The paper's published numbers beside this run's, on the pages of a run of the released scores.

The paper's own results come with its release (`paper_numbers.json`, `robustness_checks.json`: the
numbers its tables print). On a run of the released scores that holds all ten of the paper's models,
a chapter lists the numbers it shares with the paper, each with a mark: the same at the paper's
printed precision, within Monte Carlo error of it (both numbers rest on random draws; the error is
given), or different, with the reason where it is known. With fewer models, or on the book's own run,
nothing is listed: the numbers could only differ.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from IPython.display import HTML
from scipy.stats import norm

from biasaudit.book.report import TableStyle, readable
from biasaudit.data import release_items
from biasaudit.data.release_files import RELEASED_MODELS, release_file, resolve_released_source
from biasaudit.run.params import RunParams

# The paper writes Chinese as zh-CN; this project as zh.
PAPER_CODE: dict[str, str] = {"zh": "zh-CN"}
STYLE = TableStyle(columns={"quantity": "quantity", "paper": "the paper's", "ours": "this run's", "mark": "mark"},
                   formats={"paper": lambda v: v, "ours": lambda v: v}, fold_constant=False, empty="")


@dataclass(frozen=True)
class Compared:
    """One number the paper prints and this run computes: its name, both values, the paper's printed
    precision (decimals), the Monte Carlo standard error of their difference where both rest on random
    draws, and the reason for a difference where it is known."""

    quantity: str
    paper: float
    ours: float
    digits: int
    mc_se: float = math.nan
    why: str = ""

    def mark(self) -> str:
        if any(isinstance(v, float) and math.isnan(v) for v in (self.paper, self.ours)):
            if math.isnan(self.ours):
                return f"not computed by this run: {self.why}" if self.why else "not computed by this run"
            return "not in the paper's files"
        if round(self.paper, self.digits) == round(self.ours, self.digits):
            return "same at the paper's precision"
        if not math.isnan(self.mc_se) and abs(self.paper - self.ours) <= 2 * self.mc_se:
            return f"within Monte Carlo error (2 SE = {2 * self.mc_se:.{self.digits + 1}f})"
        return f"differs: {self.why}" if self.why else "differs"


def beside(rows: list[Compared]) -> pd.DataFrame:
    """The rows as a table: quantity, the paper's value and this run's at the paper's precision, mark."""
    def shown(value: float, digits: int) -> str:
        return "—" if isinstance(value, float) and math.isnan(value) else f"{value:.{digits}f}"

    return pd.DataFrame([{"quantity": r.quantity, "paper": shown(r.paper, r.digits), "ours": shown(r.ours, r.digits),
                          "mark": r.mark()} for r in rows], columns=["quantity", "paper", "ours", "mark"])


def paper_files(params: RunParams, models: list[str]) -> Path | None:
    """The folder holding the paper's result files, on a run of the released scores of all ten of its
    models; None otherwise."""
    if not params.released_scores or sorted(models) != sorted(RELEASED_MODELS):
        return None
    folder = resolve_released_source(params.released_scores)
    return folder if release_file(folder, "paper_numbers.json") is not None else None


def read_json(folder: Path, name: str) -> dict:
    path = release_file(folder, name)
    return json.loads(path.read_text(encoding="utf-8")) if path is not None else {}


def read_csv(folder: Path, name: str) -> pd.DataFrame:
    """A result table of the release (empty where the folder lacks it: older downloads)."""
    path = release_file(folder, name)
    return pd.read_csv(path) if path is not None else pd.DataFrame({"model": []})


def rewording_fields(folder: Path) -> pd.DataFrame | None:
    """The fields of the paper's rewordings beside their originals (`release_items.rewording_fields`), where the
    folder holds the texts."""
    paths = [release_file(folder, name) for name in ("prompts.json", "noise_floor_paraphrases.json", "label_fix.json")]
    return None if None in paths else release_items.rewording_fields(*paths)


def summary_text(table: pd.DataFrame) -> str:
    """How many of the listed numbers agree, in one sentence (empty where none is listed)."""
    if table.empty:
        return ""
    same = table["mark"].str.startswith("same").sum()
    within = table["mark"].str.startswith("within").sum()
    differ = table["mark"].str.startswith("differs").sum()
    explained = table["mark"].str.startswith("differs:").sum()
    missing = table["mark"].str.startswith("not computed").sum()
    parts = [f"{same} the same at the paper's printed precision"]
    if within:
        parts.append(f"{within} within Monte Carlo error")
    if missing:
        parts.append(f"{missing} not computed by this run")
    reasons = ("" if not differ else f" ({explained} of them with the reason beside it)" if explained else
               " (no reason is known for them)")
    parts.append(f"{differ} different{reasons}" if differ else "none different")
    return (f"The paper's own numbers beside this run's: of {len(table)}, " + ", ".join(parts[:-1])
            + f" and {parts[-1]}.")


# --------------------------------------------------------------------------------------------
# What each chapter shares with the paper
# --------------------------------------------------------------------------------------------


def drops_rows(numbers: dict, drops: pd.DataFrame, cells: pd.DataFrame, n_permutations: int) -> list[Compared]:
    """Chapter 10 (the paper's Table 1): the English scores, each language's drop with its interval across
    models, the cells below English and the reliable cells, soft and binary, overall and per language."""
    by = drops.set_index("language")
    rows = [Compared("English soft score", numbers["en_mean_ss"], float(by.loc["en", "soft"]), 4),
            Compared("English binary score", numbers["en_binary_ss"], float(by.loc["en", "binary"]), 4)]
    gap = numbers.get("gap_by_language", {})
    for language in [c for c in by.index if c != "en"]:
        paper = gap.get(PAPER_CODE.get(language, language))
        if paper is None:
            continue
        row = by.loc[language]
        rows += [Compared(f"drop, {language}", -paper["mean_d"], float(row["drop"]), 4),
                 Compared(f"drop, {language}: interval low", -paper["hi"], float(row["drop_low"]), 4),
                 Compared(f"drop, {language}: interval high", -paper["lo"], float(row["drop_high"]), 4)]
        mine = cells.loc[cells["language"] == language]
        for what, column, key, flips in (("reliable cells", "reliable", "n_sig", "flips"),
                                         ("reliable cells, binary", "reliable_binary", "n_sig_bin", "flips_binary")):
            refined = mine.loc[mine[flips] > n_permutations, "model"].tolist()
            why = (f"{', '.join(refined)} × {language} sits at the threshold; tested again here with "
                   f"{int(mine[flips].max()):,} sign flips (the paper used {n_permutations:,})" if refined else "")
            rows.append(Compared(f"{what}, {language}", paper[key], int(mine[column].sum()), 0, why=why))
        rows.append(Compared(f"cells below English, {language}", paper["n_neg"], int((mine["drop"] > 0).sum()), 0))
    summary = numbers.get("cells", {})
    if summary:
        rows += [Compared("reliable cells, all", summary["n_sig_bh05"], int(cells["reliable"].sum()), 0),
                 Compared("reliable cells, binary, all", summary["n_sig_bh05_binary"],
                          int(cells["reliable_binary"].sum()), 0)]
    return rows


# The paper's bootstrap resamples: its one-sided p values (bootstrap_dfg_minus_floor.csv) are multiples of 1/10,000.
PAPER_BOOTSTRAP = 10_000


def percentile_se(low: float, high: float, n_bootstrap: int, level: float = 0.95) -> float:
    """The Monte Carlo standard error of a bootstrap percentile interval's end: sqrt(p(1 − p) / B) over the
    bootstrap density at that end, the density taken as normal with the SD the interval implies."""
    p = (1 - level) / 2
    z = norm.ppf(1 - p)
    sd = (high - low) / (2 * z)
    return math.sqrt(p * (1 - p) / n_bootstrap) * sd / norm.pdf(z)


def _interval_rows(name: str, theirs: tuple[float, float], mine: tuple[float, float], n_bootstrap: int,
                   digits: int, paper_bootstrap: int = PAPER_BOOTSTRAP) -> list[Compared]:
    """Both ends of a bootstrap interval, each within the Monte Carlo error of two sets of resamples."""
    se = math.hypot(percentile_se(*mine, n_bootstrap), percentile_se(*theirs, paper_bootstrap))
    return [Compared(f"{name}, interval {end}", paper_end, float(own_end), digits, mc_se=se)
            for end, paper_end, own_end in zip(("low", "high"), theirs, mine)]


def gap_rows(numbers: dict, per_model: pd.DataFrame, gaps: pd.DataFrame, n_bootstrap: int) -> list[Compared]:
    """Chapter 12 (the paper's Table 4): per model its English soft and binary scores, its gap, its floor,
    gap − floor with its bootstrap interval (ends within Monte Carlo error: both rest on resamples), and
    the number of models whose interval lies above zero.

    `per_model`: the release's bootstrap_dfg_minus_floor.csv (model, mean_dfg, floor, diff, diff_lo,
    diff_hi); `gaps`: `Study.gaps()`."""
    by, paper = gaps.set_index("model"), per_model.set_index("model")
    rows = []
    for model in [m for m in paper.index if m in by.index]:
        mine, theirs = by.loc[model], paper.loc[model]
        for what, key, column in (("English soft score", "en_soft_by_model", "english_soft"),
                                  ("English binary score", "en_bin_by_model", "english_binary")):
            if model in numbers.get(key, {}):
                rows.append(Compared(f"{model}: {what}", numbers[key][model], float(mine[column]), 4))
        rows += [Compared(f"{model}: gap", theirs["mean_dfg"], float(mine["gap"]), 4),
                 Compared(f"{model}: floor", theirs["floor"], float(mine["floor"]), 4),
                 Compared(f"{model}: gap − floor", theirs["diff"], float(mine["gap_minus_floor"]), 4)]
        rows += _interval_rows(f"{model}: gap − floor", (theirs["diff_lo"], theirs["diff_hi"]),
                               (mine["low"], mine["high"]), n_bootstrap, 4)
    above = numbers.get("bootstrap", {}).get("n_ci_above_0")
    if above is not None and len(rows):
        rows.append(Compared("models whose gap − floor interval lies above zero", above,
                             int((by["low"] > 0).sum()), 0))
    return rows


# The paper's names of the item sources (review3_checks.json) and this project's.
PAPER_SOURCES: dict[str, str] = {"StereoSet": "stereoset", "BBQ": "bbq", "Written": "written",
                                 "BBQ+Written": "bbq + written"}


def source_rows(review: dict, table: pd.DataFrame) -> list[Compared]:
    """Chapter 14 (the paper's Table 9): per source its items, its cells below English, its reliable cells
    in soft and in binary scores (each source its own family), and its carry-over slope and same choice
    after translation and after rewording. (The paper's mixed-model drop is not computed here.)"""
    by, rows = table.set_index("source"), []
    for theirs, ours in PAPER_SOURCES.items():
        paper, name = review.get("by_source", {}).get(theirs), theirs.replace("+", " + ")
        if paper is None or ours not in by.index:
            continue
        mine = by.loc[ours]
        rows += [Compared(f"{name}: items", paper["items"], int(mine["n_items"]), 0),
                 Compared(f"{name}: cells below English", paper["cells_negative"], int(mine["cells_below_english"]), 0),
                 Compared(f"{name}: reliable cells", paper["reliable"],
                          int(mine["reliable_drops"] + mine["reliable_rises"]), 0),
                 Compared(f"{name}: reliable cells, binary", paper["reliable_binary"], int(mine["reliable_binary"]), 0),
                 Compared(f"{name}: slope, translation", paper["slope_tr"], float(mine["slope_translation"]), 2),
                 Compared(f"{name}: slope, rewording", paper["slope_rw"], float(mine["slope_rewording"]), 2),
                 Compared(f"{name}: same choice, translation", paper["agree_tr"],
                          float(mine["same_choice_translation"]), 3),
                 Compared(f"{name}: same choice, rewording", paper["agree_rw"], float(mine["same_choice_rewording"]),
                          3)]
    return rows


def judgment_rows(quality: dict, judgments: pd.DataFrame | None) -> list[Compared]:
    """Chapter 16 (the inputs of the paper's Tables 10 and 12): how many of each language's translations the
    release's contrast judgments call preserved, partly preserved and lost, and in all."""
    paper = quality.get("judgments", {})
    if judgments is None or not paper:
        return []
    counts = judgments.groupby(["language", "judgment"]).size()
    rows = []
    for code, theirs in paper.get("by_lang", {}).items():
        language = "zh" if code == "zh-CN" else code
        rows += [Compared(f"contrast {kind}, {language}", theirs[kind], int(counts.get((language, kind), 0)), 0)
                 for kind in ("preserved", "partly", "lost") if kind in theirs]
    totals = judgments["judgment"].value_counts()
    rows += [Compared(f"contrast {kind}, all", value, int(totals.get(kind, 0)), 0)
             for kind, value in paper.get("total", {}).items()]
    return rows


# More rows than this, and the comparison's table is folded under its summary sentence.
FOLD_ROWS = 40


def block(rows: list[Compared], what: str):
    """The comparison as the page shows it (a sentence and the table), or None where there is none."""
    if not rows:
        return None
    table = beside(rows)
    intro = (f"<p><strong>The paper beside this run.</strong> {html.escape(summary_text(table))} The paper's values "
             f"come from its own result files ({html.escape(what)}), at the precision it prints them.</p>")
    shown = readable(table, STYLE).to_html()
    if len(table) > FOLD_ROWS:  # a long list stays out of the reader's way until asked for
        shown = f"<details><summary>All {len(table)} numbers, one per row</summary>{shown}</details>"
    return HTML(intro + shown)


def _code(language: str) -> str:
    return PAPER_CODE.get(language, language)


def floor_rows(numbers: dict, floor: pd.DataFrame, subset: pd.DataFrame, same: pd.DataFrame | None = None,
               similarity: pd.DataFrame | None = None, similarity_why: str = "",
               llm_floor: dict | None = None) -> list[Compared]:
    """Chapter 11 (the paper's Table 3): per route the rewordings' similarity to their originals ("Sim.";
    `similarity`: `chapters.noise_floor.similarity_by_route`, or None and `similarity_why` saying why) and the share of
    fields returned unchanged ("Same"; `same`: `release_items.rewording_sameness`); the floor over all routes and
    per route, the reliable rewording cells; on the items the LLM rewordings cover, each route's and the LLM
    rewordings' floor, median |change| and SD (`subset`: `analyses.separate_rewordings`); the LLM rewordings'
    items, the SD of all their changes and the noise-only value it implies (`llm_floor`: robustness_checks.json's
    "llm_floor")."""
    paper, by = numbers.get("floor", {}), floor.set_index("via")
    fidelity, rows = numbers.get("fidelity", {}), []
    mine = similarity.loc[similarity["field"] == "all"].set_index("pivot")["similarity"] if similarity is not None \
        else pd.Series(dtype=float)
    for pivot, fields in fidelity.get("cos_by_pivot_field_mean", {}).items():
        if pivot in by.index:  # the paper prints the mean over its three fields, each over the same rewordings
            rows.append(Compared(f"similarity to the original, via {pivot}", float(np.mean(list(fields.values()))),
                                 float(mine.get(pivot, math.nan)), 2, why=similarity_why))
    if same is not None:
        unchanged = same.set_index("pivot")["share_unchanged"]
        rows += [Compared(f"fields returned unchanged, via {pivot} (the paper's count)", value,
                          float(unchanged[pivot]), 2)
                 for pivot, value in fidelity.get("share_identical_by_pivot", {}).items() if pivot in unchanged.index]
    if "all routes" in by.index and paper:
        rows += [Compared("noise floor, all routes (median of the models' floors)", paper["median_floor"],
                          float(by.loc["all routes", "floor"]), 4),
                 Compared("reliable rewording cells", paper["n_sig_bh05"], int(by.loc["all routes", "reliable_cells"]),
                          0)]
    for pivot, value in paper.get("median_floor_by_pivot", {}).items():
        if pivot in by.index:
            rows.append(Compared(f"floor, via {pivot}", value, float(by.loc[pivot, "floor"]), 4))
    on_subset = subset.set_index("via")
    for via, theirs in numbers.get("extra_pivot", {}).items():
        if via in on_subset.index:
            name = "LLM rewordings" if via == "llm" else f"via {via}, on the LLM rewordings' items"
            ours = on_subset.loc[via]
            rows += [Compared(f"{name}: floor (median over models)", theirs["floor"], float(ours["floor"]), 3),
                     Compared(f"{name}: median |change|", theirs["median_abs_d"], float(ours["median_abs_d"]), 4),
                     Compared(f"{name}: SD of the changes", theirs["sd_d"], float(ours["sd_d"]), 4)]
    if llm_floor and "llm" in on_subset.index:
        ours = on_subset.loc["llm"]
        rows += [Compared("LLM rewordings: items", llm_floor["n_items"], int(ours["n_items"]), 0),
                 Compared("LLM rewordings: SD of the changes, all pairs", llm_floor["sd"], float(ours["sd_pooled"]), 4),
                 Compared("LLM rewordings: noise-only value", llm_floor["expected"],
                          float(ours["noise_only_pooled"]), 4)]
    return rows


def carry_rows(numbers: dict, table: pd.DataFrame) -> list[Compared]:
    """Chapter 13 (the paper's Tables 12 and 14): slope, r and same choice of translation and rewording,
    pooled and per language or route (every model × item pair pooled, as the paper fits them)."""
    by = table.set_index(["change", "group"])
    rows = []

    def add(name: str, value: float | None, key: tuple[str, str], column: str, digits: int) -> None:
        if value is not None and key in by.index:
            rows.append(Compared(name, value, float(by.loc[key, column]), digits))

    add("slope, translation", numbers.get("slope_cross"), ("translation", "all"), "slope", 2)
    add("r, translation", numbers.get("corr_cross"), ("translation", "all"), "r", 2)
    add("slope, rewording", numbers.get("slope_para"), ("rewording", "all"), "slope", 2)
    add("r, rewording", numbers.get("corr_para"), ("rewording", "all"), "r", 2)
    for language, value in numbers.get("slope_by_lang", {}).items():
        code = "zh" if language == "zh-CN" else language
        add(f"slope, {code}", value, ("translation", code), "slope", 2)
        add(f"same choice, {code}", numbers.get("agree_by_lang", {}).get(language), ("translation", code),
            "same_choice", 3)
    for pivot, value in numbers.get("slope_by_pivot", {}).items():
        add(f"slope, via {pivot}", value, ("rewording", pivot), "slope", 2)
        add(f"same choice, via {pivot}", numbers.get("agree_by_pivot", {}).get(pivot), ("rewording", pivot),
            "same_choice", 3)
    return rows


def summed_rows(robustness: dict, table: pd.DataFrame) -> list[Compared]:
    """Chapter 17 (the paper's Table 7): with summed log-probs, the English soft score and per language the
    drop, the reliable cells and the slope."""
    summed, by = robustness.get("summed"), table.set_index("language")
    if not summed or "en" not in by.index:
        return []
    rows = [Compared("English soft score, sums", summed["en_mean"], float(by.loc["en", "soft_sum"]), 4)]
    for language in [c for c in by.index if c != "en"]:
        code = _code(language)
        if code in summed.get("drop_by_lang", {}):
            rows.append(Compared(f"drop with sums, {language}", summed["drop_by_lang"][code],
                                 float(by.loc[language, "drop_sum"]), 4))
        if code in summed.get("sig_by_lang", {}):
            rows.append(Compared(f"reliable cells with sums, {language}", summed["sig_by_lang"][code],
                                 int(by.loc[language, "reliable_drops_sum"]), 0))
        if code in summed.get("slope_by_lang", {}):
            rows.append(Compared(f"slope with sums, {language}", summed["slope_by_lang"][code],
                                 float(by.loc[language, "slope_sum"]), 2))
    others = by.loc[by.index != "en"]
    if "n_sig_bh" in summed:
        rows.append(Compared("reliable cells with sums, all", summed["n_sig_bh"], int(others["reliable_drops_sum"].sum()),
                             0))
    return rows


# The paper's sign flips per test: its smallest p values are 1 / 20,001 (cell_tests.csv, translation_quality.json).
PAPER_FLIPS = 20_000


def p_value_se(p: float, n_permutations: int) -> float:
    """The Monte Carlo standard error of the difference between two sign-flip p values near `p`, one from the
    paper's 20,000 flips and one from this run's `n_permutations`."""
    return math.sqrt(p * (1 - p) * (1 / PAPER_FLIPS + 1 / n_permutations))


# The paper's subsets of its item-level tests (translation_quality.json `item_level`) and this project's names.
PAPER_SUBSETS: dict[str, str] = {"all": "all items", "preserved": "contrast preserved",
                                 "not_lost": "contrast not lost"}


def item_level_rows(quality: dict, tests: pd.DataFrame, n_permutations: int, n_bootstrap: int) -> list[Compared]:
    """Chapter 16 (the paper's Table 10): per subset and language, the items, the translation drop, how far
    it lies beyond the items' own rewording drop (the excess) with its interval, and the test's p and q.

    `tests`: `analyses.against_rewording`. The q values' Monte Carlo error is taken as the p value's, scaled
    by q / p (Benjamini–Hochberg multiplies a p value by a factor fixed by the ranks)."""
    by, rows = tests.set_index(["subset", "language"]), []
    for key, subset in PAPER_SUBSETS.items():
        for code, theirs in quality.get("item_level", {}).get(key, {}).items():
            language = "zh" if code == "zh-CN" else code
            if (subset, language) not in by.index:
                continue
            mine, name = by.loc[(subset, language)], f"{subset}, {language}"
            rows += [Compared(f"{name}: items", theirs["items"], int(mine["n_items"]), 0),
                     Compared(f"{name}: drop", theirs["drop"], float(mine["translation_drop"]), 3),
                     Compared(f"{name}: beyond rewording", theirs["beyond"], float(mine["excess_drop"]), 3)]
            rows += _interval_rows(f"{name}: beyond rewording", (theirs["lo"], theirs["hi"]),
                                   (mine["low"], mine["high"]), n_bootstrap, 3)
            se = p_value_se(theirs["p"], n_permutations)
            rows += [Compared(f"{name}: p", theirs["p"], float(mine["p"]), 3, mc_se=se),
                     Compared(f"{name}: q", theirs["q"], float(mine["q"]), 3,
                              mc_se=se * theirs["q"] / theirs["p"] if theirs["p"] else math.nan)]
    return rows


def _association_key(name: str, plain: str = "translation") -> tuple[str, str] | None:
    """The carry-over table's (change, group) of a key of the paper's association results (`lang_es`,
    `pivot_de`, `translated_all`; in a subset's results `es` and `pooled`, a language of change `plain`)."""
    if name in ("translated_all", "pooled"):
        return "translation", "all"
    if name == "reworded_all":
        return "rewording", "all"
    for prefix, change in (("lang_", "translation"), ("pivot_", "rewording"), ("", plain)):
        code = name.removeprefix(prefix)
        if name.startswith(prefix) and (len(code) == 2 or code == "zh-CN"):
            return change, "zh" if code == "zh-CN" else code
    return None


def association_rows(association: dict, table: pd.DataFrame, n_bootstrap: int, *, subset: str = "",
                     plain: str = "translation") -> list[Compared]:
    """Chapter 13 (the paper's Table 12): per language and route, and pooled, the items, r with its interval,
    the SD ratio and the slope's interval (the slope itself is `carry_rows`'; for a `subset`, e.g. "contrast
    preserved", it is listed here).

    `association`: association_and_dimensions.json's `association`, or translation_quality.json's
    `association[<subset>]` (keys `pooled` and language codes, of change `plain`: its `within` results are
    "within-language rewording"); `table`: `analyses.carry_over_table`."""
    by, rows = table.set_index(["change", "group"]), []
    for name, theirs in association.items():
        key = _association_key(name, plain)
        if key is None or key not in by.index:
            continue
        mine = by.loc[key]
        label = f"{subset + ', ' if subset else ''}{key[0]}, {key[1]}"
        rows += [Compared(f"{label}: items", theirs["n_items"], int(mine["n_items"]), 0),
                 Compared(f"{label}: r", theirs["r"], float(mine["r"]), 2)]
        rows += _interval_rows(f"{label}: r", (theirs["r_lo"], theirs["r_hi"]), (mine["r_low"], mine["r_high"]),
                               n_bootstrap, 2)
        rows.append(Compared(f"{label}: SD ratio", theirs["sd_ratio"], float(mine["sd_ratio"]), 2))
        if subset:
            rows.append(Compared(f"{label}: slope", theirs["slope"], float(mine["slope"]), 2))
        rows += _interval_rows(f"{label}: slope", (theirs["slope_lo"], theirs["slope_hi"]),
                               (mine["slope_low"], mine["slope_high"]), n_bootstrap, 2)
    return rows


def within_rows(review: dict, same_items: pd.DataFrame) -> list[Compared]:
    """Chapter 13 (the paper's Table 15): per language reworded within itself, on the same items, the items,
    pairs, slope, r and same choice of the rewording within the language, and the slopes of translating
    English into it and of rewording English.

    `review`: review_runs.json; `same_items`: `analyses.within_language_same_items`."""
    by, rows = same_items.set_index("language"), []
    for language, theirs in review.get("within_language", {}).items():
        if language not in by.index:
            continue
        mine, name = by.loc[language], f"within {language}"
        rows += [Compared(f"{name}: items", theirs["items"], int(mine["n_items"]), 0),
                 Compared(f"{name}: pairs", theirs["pairs"], int(mine["n_pairs"]), 0),
                 Compared(f"{name}: slope, rewording within {language}", theirs["slope_within"],
                          float(mine["slope_within"]), 2),
                 Compared(f"{name}: r, rewording within {language}", theirs["corr_within"], float(mine["r_within"]), 2),
                 Compared(f"{name}: same choice, rewording within {language}", theirs["agree_within"],
                          float(mine["same_choice_within"]), 2),
                 Compared(f"{name}: slope, English to {language}, same items", theirs["slope_cross_same_items"],
                          float(mine["slope_translation"]), 2),
                 Compared(f"{name}: slope, English reworded, same items", theirs["slope_en_rewording_same_items"],
                          float(mine["slope_rewording"]), 2)]
    return rows


def dimension_rows(results: dict, table: pd.DataFrame, n_bootstrap: int) -> list[Compared]:
    """Chapter 15 (the paper's Table 13): per dimension its items, its drop with the interval, r after
    translation and after rewording, and the share of leaning pairs a translation reverses; over all
    dimensions, the leaning pairs and the reversed share.

    `results`: association_and_dimensions.json; `table`: `analyses.by_dimension`."""
    by, rows = table.set_index("dimension"), []
    for name, theirs in results.get("by_dimension", {}).items():
        dimension = name.split("/")[0].lower()
        if dimension not in by.index:
            continue
        mine = by.loc[dimension]
        rows += [Compared(f"{dimension}: items", theirs["items"], int(mine["n_items"]), 0),
                 Compared(f"{dimension}: drop", theirs["drop"], float(mine["drop"]), 3)]
        rows += _interval_rows(f"{dimension}: drop", (theirs["lo"], theirs["hi"]),
                               (mine["drop_low"], mine["drop_high"]), n_bootstrap, 3)
        rows += [Compared(f"{dimension}: r, translation", theirs["r_tr"], float(mine["r_translation"]), 2),
                 Compared(f"{dimension}: r, rewording", theirs["r_rw"], float(mine["r_rewording"]), 2),
                 Compared(f"{dimension}: reversed share", theirs["reversed"], float(mine["reversal_share"]), 2)]
    fate = results.get("fate", {}).get("translated")
    if fate and "all" in by.index:
        rows += [Compared("all dimensions: leaning pairs", fate["n"], int(by.loc["all", "n_leaning"]), 0),
                 Compared("all dimensions: reversed share", fate["reversed"], float(by.loc["all", "reversal_share"]),
                          2)]
    return rows


def faithful_rows(review: dict, faithful: pd.DataFrame, n_bootstrap: int) -> list[Compared]:
    """Chapter 16 (the paper's Table 6 caption): how much keeping only faithful translations lowers the drop (the
    languages weighted equally), with its paired interval. The table's own numbers are `kept_rows`.

    `review`: review2_checks.json; `faithful`: `analyses.faithful_only` (empty without a similarity table)."""
    paper, by = review.get("faithful"), faithful.set_index("language")
    if not paper or "mean" not in by.index:
        return []
    mean = by.loc["mean"]
    return [Compared("reduction", paper["reduction"], float(mean["reduction"]), 3),
            *_interval_rows("reduction", tuple(paper["reduction_ci"]), (mean["reduction_low"], mean["reduction_high"]),
                            n_bootstrap, 3, paper_bootstrap=PAPER_REDUCTION_BOOTSTRAP)]


# The paper's interval of the reduction rests on 1,000 resamples (its controls script), not 10,000.
PAPER_REDUCTION_BOOTSTRAP = 1_000

# The names robustness_checks.json gives the subsets of the paper's Table 6, and this book's names for them.
KEPT_NAMES: dict[str, str] = {"all": "all", "faithful": "faithful", "faithful_fluent_nobbq": "faithful, equal fluency"}


def kept_rows(robustness: dict, kept: pd.DataFrame) -> list[Compared]:
    """Chapter 16 (the paper's Table 6): per subset of translations kept (all, faithful, + equal fluency) its
    pairs, its drop per language and their equal-weight mean, and its carry-over slope.

    `robustness`: robustness_checks.json; `kept`: `analyses.kept_translations`."""
    by, rows = kept.set_index(["subset", "language"]), []
    for key, theirs in robustness.get("filters", {}).items():
        subset = KEPT_NAMES.get(key)
        if (subset, "mean") not in by.index:
            continue
        rows.append(Compared(f"{subset}: pairs", theirs["n"], int(by.loc[(subset, "mean"), "n_pairs"]), 0))
        for code, drop in theirs.get("drop_by_lang", {}).items():
            language = "zh" if code == "zh-CN" else code
            if (subset, language) in by.index:
                rows.append(Compared(f"{subset}: drop, {language}", drop, float(by.loc[(subset, language), "drop"]), 3))
        rows += [Compared(f"{subset}: drop, languages weighted equally", theirs["drop_equal_weight"],
                          float(by.loc[(subset, "mean"), "drop"]), 3),
                 Compared(f"{subset}: slope", theirs["slope_pooled"], float(by.loc[(subset, "mean"), "slope"]), 2)]
    return rows


def surface_rows(review: dict, fit: pd.DataFrame, matched: pd.DataFrame) -> list[Compared]:
    """Chapter 18 (the paper's Table 11): per language the models' agreement on the changes, before and after the
    continuations' lengths are regressed out, and the R² of the lengths; where the paper has word frequencies
    (not Korean, not Swahili), also the agreement and R² with them added (its table prints that R² there); the
    equal-length pairs' count, drop and slope beside all pairs'.

    `review`: review2_checks.json; `fit`: `analyses.length_fit`; `matched`: `analyses.length_matched`."""
    by, rows = fit.set_index("language"), []
    for code, theirs in review.get("surface", {}).items():
        language = "zh" if code == "zh-CN" else code
        if language in by.index:
            mine = by.loc[language]
            rows += [Compared(f"models agree on the change, {language}", theirs["agree_raw"],
                              float(mine["agreement_change"]), 2),
                     Compared(f"models agree on the change, lengths removed, {language}", theirs["agree_len"],
                              float(mine["agreement_length"]), 2),
                     Compared(f"R² of the lengths, {language}", theirs["r2_len"], float(mine["r2_length"]), 3)]
            if "agree_len_freq" in theirs:  # the languages whose word frequencies the paper has
                rows += [Compared(f"models agree on the change, lengths and frequencies removed, {language}",
                                  theirs["agree_len_freq"], float(mine["agreement_length_frequency"]), 2),
                         Compared(f"R² of lengths and frequencies, {language}", theirs["r2_len_freq"],
                                  float(mine["r2_length_frequency"]), 3)]
    paper, by = review.get("length_matched"), matched.set_index("pairs")
    if paper and {"equal length", "all"} <= set(by.index):
        rows += [Compared("equal-length pairs", paper["pairs"], int(by.loc["equal length", "n_pairs"]), 0),
                 Compared("drop, equal-length pairs", paper["drop"], float(by.loc["equal length", "drop"]), 3),
                 Compared("slope, equal-length pairs", paper["slope"], float(by.loc["equal length", "slope"]), 2),
                 Compared("drop, all pairs", paper["drop_all"], float(by.loc["all", "drop"]), 3),
                 Compared("slope, all pairs", paper["slope_all"], float(by.loc["all", "slope"]), 2)]
    return rows
