"""Chapter 22: is each language's lower score a real shift? One verdict per language, from the evidence
of the earlier chapters, by a rule written on the page (`biasaudit.analyses.verdict`)."""

from __future__ import annotations

import pandas as pd

from biasaudit.analyses import verdict as v
from biasaudit.book import charts
from biasaudit.book.chapters.faithful import read_similarity
from biasaudit.book.report import Report, TableStyle, interval_column, spoken_list
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study
from biasaudit.translate.languages import language_label

LANGUAGE_STYLE = TableStyle(columns={
    "language": "language", "shown_verdict": "verdict", "drop": "drop (English − language)", "interval": "95% interval over items",
    "reliable": "reliable shift in", "floor": "noise floor", "drop_faithful": "drop, faithful translations",
    "slope": "carry-over slope", "power": "power at this scatter"},
    formats={"power": "{:.0%}", "language": language_label})
# "reliable" is q below alpha (the prose gives alpha); the items per cell go to the caption when equal.
CELL_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "verdict": "verdict", "n": "items", "drop": "drop (English − language)",
    "interval": "95% interval over items", "q": "q", "floor": "model's floor", "drop_faithful": "drop, faithful",
    "slope": "slope", "power": "power"}, formats={"power": "{:.0%}"})


# The paper's own conclusion (its text, not a table): for these languages the drop clearly exceeds what
# rewording English produces; for the others it does not claim so.
PAPER_EXCEEDS: frozenset[str] = frozenset({"hi", "ko", "sw"})
PAPER_STYLE = TableStyle(columns={"language": "language", "book": "this book's verdict", "paper": "the paper's conclusion"},
                         formats={"language": language_label}, empty="")


def paper_table(languages: pd.DataFrame) -> pd.DataFrame:
    """The book's verdict per language beside the paper's conclusion (released runs only)."""
    return pd.DataFrame({"language": languages["language"], "book": languages["verdict"],
                         "paper": ["drop exceeds rewording" if code in PAPER_EXCEEDS else "no such claim"
                                   for code in languages["language"]]})


def paper_text(table: pd.DataFrame) -> str:
    """Where the book's verdict and the paper's conclusion part ways, and why that can be."""
    if table.empty:
        return ("This run is not the paper's released study, so its verdicts are not set beside the paper's "
                "conclusion (the released part's copy of this page does that).")
    claims = table["paper"] == "drop exceeds rewording"
    real = table["book"] == v.REAL
    apart = table.loc[claims != real, "language"].tolist()
    if not apart:
        return ("The book's verdict and the paper's conclusion agree in every language: a real shift exactly where the "
                "paper says the drop exceeds what rewording English produces.")
    return (f"They part ways for {spoken_list([language_label(c) for c in apart])}. The paper reads the pooled drop "
            "against the pooled noise floor; the book first asks each model's cell, and pools only when the cells that "
            "have the power to tell do not agree, so a language can be a real shift in some models without the paper "
            "claiming it, or the reverse.")


def pooled_text(languages: pd.DataFrame) -> str:
    """Which languages the pooled drop decided (the table marks them)."""
    pooled = languages.loc[languages["decided_by"] == "pooled drop", "language"].tolist()
    if not pooled:
        return "In this run the cells decided every language."
    return f"In this run the pooled drop decided {spoken_list([language_label(c) for c in pooled])}."


def summary_text(languages: pd.DataFrame) -> str:
    parts = []
    for verdict in (*v.VERDICTS, v.DISAGREE):
        names = languages.loc[languages["verdict"] == verdict, "language"].tolist()
        if names:
            parts.append(f"{verdict}: {spoken_list([language_label(n) for n in names])}")
    return "; ".join(parts) + "."


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    similarity = read_similarity(params)
    cells = study.verdict_cells(similarity, params.faithful_threshold, params.n_runs)
    languages = v.verdict_languages(cells, study.scores, study.options)
    out = Report()
    # Shown narrow enough to read at a glance: the interval in one column, the reliable models as "k of m".
    out.add_table("languages", languages.assign(
        shown_verdict=[f"{verdict} (pooled drop)" if by == "pooled drop" else verdict
                       for verdict, by in zip(languages["verdict"], languages["decided_by"])],
        interval=interval_column(languages["low"], languages["high"]),
        reliable=[f"{k} of {m} models" for k, m in zip(languages["reliable_models"], languages["n_models"])]),
        LANGUAGE_STYLE)
    out.add_table("cells", cells.assign(interval=interval_column(cells["low"], cells["high"])), CELL_STYLE)
    paper = paper_table(languages) if params.released_scores else pd.DataFrame()
    out.add_table("paper", paper, PAPER_STYLE)
    out.values["paper_text"] = paper_text(paper)
    out.values.update({
        "summary_text": summary_text(languages), "n_languages": len(languages), "n_cells": len(cells),
        "n_models": int(cells["model"].nunique()), "alpha": params.alpha, "min_power": v.MIN_POWER,
        "n_real": int((cells["verdict"] == v.REAL).sum()), "n_noise": int((cells["verdict"] == v.NOISE).sum()),
        "n_underpowered": int((cells["verdict"] == v.UNDERPOWERED).sum()),
        "pooled_text": pooled_text(languages),
        "faithful_text": ("Faithful-only drops come from the similarity table of chapter 01." if similarity is not None
                          else "This run has no similarity table, so the faithful-only column is empty."),
    })
    out.figures["cells"] = charts.verdict_chart(cells)
    return out
