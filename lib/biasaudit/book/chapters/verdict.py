"""Chapter 22: is each language's lower score a real shift? One verdict per language, by a rule written on
the page (`biasaudit.analyses.verdict`), with the model × language cells beside it as evidence."""

from __future__ import annotations

import altair as alt
import pandas as pd

from biasaudit.analyses import verdict as v
from biasaudit.analyses.floor import model_floors
from biasaudit.book import charts, explore
from biasaudit.book.prose import count_noun
from biasaudit.book.report import Report, TableStyle, interval_column, spoken_list, with_interval
from biasaudit.book.solutions import with_changes
from biasaudit.data.languages import language_label
from biasaudit.data.release_files import RELEASED_MODELS
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

# The evidence per model that explains a verdict (faithful-only drop, carry-over) is in the cells' table.
LANGUAGE_STYLE = TableStyle(columns={
    "language": "language", "verdict": "verdict", "shown_drop": "drop (English − language) [95%]", "reason": "why",
    "reliable": "reliable in", "above_floor": "beyond own floor in", "power": "power (median)"},
    formats={"power": "{:.0%}", "language": language_label})
# "reliable" is q below alpha (the prose gives alpha); the items per cell go to the caption when equal.
CELL_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "evidence": "this model's cell", "n": "items",
    "drop": "drop (English − language)", "interval": "95% interval over items", "q": "q", "floor": "model's floor",
    "power": "power", "drop_faithful": "drop, faithful", "slope": "slope"},
    formats={"power": "{:.0%}", "language": language_label})


# The paper's own conclusion (its text, not a table): for these languages the drop clearly exceeds what
# rewording English produces; for the others it does not claim so.
PAPER_EXCEEDS: frozenset[str] = frozenset({"hi", "ko", "sw"})
PAPER_CLAIM, NO_CLAIM = "clearly exceeds rewording", "no such claim"
PAPER_STYLE = TableStyle(columns={"language": "language", "book": "this book's verdict", "paper": "the paper's conclusion"},
                         formats={"language": language_label}, empty="")


def paper_table(languages: pd.DataFrame) -> pd.DataFrame:
    """The book's verdict per language beside the paper's conclusion (released runs only)."""
    return pd.DataFrame({"language": languages["language"], "book": languages["verdict"],
                         "paper": [PAPER_CLAIM if code in PAPER_EXCEEDS else NO_CLAIM for code in languages["language"]]})


def paper_text(table: pd.DataFrame, models: list[str]) -> str:
    """The book's verdicts against the paper's conclusion: whether this run is the paper's study (all ten
    models) or part of it, and where the two part ways, and why that can be."""
    if table.empty:
        return ("This run is not the paper's released study: the paper's conclusion is about other models and "
                "items, so it is not set beside these verdicts.")
    missing = [m for m in RELEASED_MODELS if m not in models]
    scope = ("This run is the paper's released study, all ten of its models." if not missing else
             f"This run holds {count_noun(len(models), 'model')} of the paper's ten ({', '.join(models)}), so the "
             f"comparison is partial: the paper's conclusion rests on all ten, and {spoken_list(missing)} are "
             "missing here.")
    claims = table["paper"] == PAPER_CLAIM
    real = table["book"] == v.REAL
    apart = table.loc[claims != real, "language"].tolist()
    if not apart:
        return (f"{scope} The book's verdict and the paper's conclusion agree in every language: a real shift exactly "
                "where the paper says the drop clearly exceeds what rewording English produces.")
    why = ("On the paper's ten models the rule makes the paper's own comparison (the drop's interval across models "
           "against the models' floors), so a difference means that this run's drops or floors are not the paper's; "
           "the cells below give them model by model." if not missing else
           "With fewer models the interval is wider, or is taken over items when there are fewer than "
           f"{v.MIN_MODELS} models, and the floors are those of the models at hand.")
    return f"{scope} The two part ways for {spoken_list([language_label(c) for c in apart])}. {why}"


BESIDE_STYLE = TableStyle(columns={"language": "language", "with": "verdict, every model", "without": "verdict, the paper's models alone"},
                          formats={"language": language_label}, empty="")


def beside_table(study: Study, own: list[str]) -> pd.DataFrame:
    """Each language's verdict over every model of a run beside the paper's models, and over the paper's
    models alone: what the run's own models change (empty where the run scored none beside them)."""
    if not own:
        return pd.DataFrame(columns=["language", "with", "without"])
    shown = {pipeline.shown_model(m, own) for m in own}
    paper = sorted(set(study.scores["model"]) - shown)
    alone = Study(study.run_name, study.options, paper).language_verdicts()[["language", "verdict"]]
    both = study.language_verdicts()[["language", "verdict"]]
    return both.rename(columns={"verdict": "with"}).merge(alone.rename(columns={"verdict": "without"}),
                                                          on="language", how="outer")


def beside_text(table: pd.DataFrame, own: list[str], n_paper: int) -> str:
    """Whether adding the run's own models to the paper's changes any language's verdict."""
    if not own:
        return ("This run scores no model of its own beside the paper's, so there is one verdict per language. "
                "The params file params/beside_paper.yml (make book PARAMS=params/beside_paper.yml) scores a model on "
                "the paper's items and shows, here, each language's verdict with it and without it.")
    names = spoken_list([pipeline.shown_model(m, own) for m in own])
    changed = table.loc[table["with"] != table["without"]]
    paper = "the paper's one model here" if n_paper == 1 else f"the paper's {count_noun(n_paper, 'model')}"
    head = (f"The verdicts above are over every model of this run: {paper}, as released, and {names}, scored here on "
            "the paper's items.")
    tail = "The comparison with the paper's conclusion below reads the paper's models alone."
    if changed.empty:
        return f"{head} Adding {names} changes no language's verdict: the paper's models alone give the same. {tail}"
    moves = "; ".join(f"{language_label(r.language)}: {r.without} without, {r.with_} with"
                      for r in changed.rename(columns={"with": "with_"}).itertuples())
    return (f"{head} Adding {names} changes the verdict of {count_noun(len(changed), 'language')} ({moves}). The "
            "rule reads the interval across models and the largest floor, and one more model moves both. " + tail)


def basis_text(languages: pd.DataFrame, min_models: int = v.MIN_MODELS) -> str:
    """Which interval the verdicts read, and why, for this run's number of models."""
    bases = set(languages["basis"])
    n = int(languages["n_models"].max()) if len(languages) else 0
    if bases == {v.ACROSS_MODELS}:
        return (f"With {n} models, each language's interval is a Student-t interval across the models (the models "
                "as units, as in chapter 10): the verdict speaks for models like these, not only for these.")
    if bases == {v.OVER_ITEMS} and n <= 1:
        return ("With one model there is no interval across models, so each language's interval is a bootstrap over "
                "items of the model's per-item drops: the verdict speaks for this model only.")
    if bases == {v.OVER_ITEMS}:
        return (f"With {n} models (fewer than {min_models}), an interval across models would rest on {n - 1} "
                f"degree{'s' if n - 1 != 1 else ''} of freedom and decide nothing, so each language's interval is a "
                "bootstrap over items of each item's drop averaged over the models: the verdict speaks for these "
                "models only. Chapter 10 shows the interval across models beside it.")
    across = languages.loc[languages["basis"] == v.ACROSS_MODELS, "language"].tolist()
    return (f"The interval is across models for {spoken_list([language_label(c) for c in across])}, which "
            f"{'has' if len(across) == 1 else 'have'} at least {min_models} models, and over items for the others.")


def floors_text(model_floors: pd.Series) -> str:
    """The floors the verdicts are read against (`analyses.floor.model_floors`): the smallest and the
    largest, with their models, and the typical (median) one."""
    floors = model_floors.dropna().sort_values()
    if floors.empty:
        return "This run has no English rewordings, so there is no noise floor and no verdict."
    if len(floors) == 1:
        return (f"The one model's floor, {floors.iloc[0]:.4f} ({floors.index[0]}), is both the typical and the "
                "largest floor.")
    return (f"The models' floors run from {floors.iloc[0]:.4f} ({floors.index[0]}) to {floors.iloc[-1]:.4f} "
            f"({floors.index[-1]}); the typical (median) floor is {floors.median():.4f}.")


def summary_text(languages: pd.DataFrame) -> str:
    """Every language under its verdict, strongest evidence of a shift first."""
    parts = []
    for verdict in (*v.VERDICTS, v.NO_FLOOR):
        names = languages.loc[languages["verdict"] == verdict, "language"].tolist()
        if names:
            parts.append(f"{verdict}: {spoken_list([language_label(n) for n in names])}")
    return ("; ".join(parts) + ".") if parts else "This run has no translated items, so no language has a verdict."


def report(params: RunParams, only_items: pd.Series | None = None) -> Report:
    """The verdicts of the run's scores; with `only_items`, of those item versions' scores alone and
    without the run's similarity table: what a run scoring only them would find (chapter 22's exercise 3)."""
    study = Study.from_params(params)
    if only_items is not None:
        study = study.restricted_to(only_items)
    similarity = pipeline.read_similarity(params) if only_items is None else None
    cells = study.verdict_cells(similarity, params.faithful_threshold, params.n_runs)
    languages = study.language_verdicts().merge(v.language_evidence(cells, study.scores, study.options),
                                                on="language", how="left")
    models = sorted(study.scores["model"].unique())
    out = Report()
    out.add_table("languages", languages.assign(
        shown_drop=with_interval(languages["drop"], languages["low"], languages["high"], 4),
        reliable=[f"{k} of {m} models" for k, m in zip(languages["reliable_models"], languages["n_models"])],
        above_floor=[f"{k} of {m} models" for k, m in zip(languages["above_floor_models"], languages["n_models"])]),
        LANGUAGE_STYLE)
    out.add_table("cells", cells.assign(interval=interval_column(cells["low"], cells["high"])), CELL_STYLE)
    own = pipeline.own_models(params.run_name) if only_items is None else []
    beside = beside_table(study, own)
    out.add_table("beside", beside, BESIDE_STYLE)
    # the paper's conclusion is about its models: beside it, their verdicts alone
    alone = beside[["language", "without"]].rename(columns={"without": "verdict"}) if own else languages
    paper = paper_table(alone) if params.released_scores else pd.DataFrame()
    out.add_table("paper", paper, PAPER_STYLE)
    counts = cells["evidence"].value_counts()
    out.values.update({
        "paper_text": paper_text(paper, [m for m in models if m in RELEASED_MODELS]),
        "beside_text": beside_text(beside, own, len(models) - len(own)), "summary_text": summary_text(languages),
        "basis_text": basis_text(languages), "floors_text": floors_text(model_floors(study.floor_cells())),
        "min_models": v.MIN_MODELS,
        "n_languages": len(languages), "n_cells": len(cells), "n_models": int(cells["model"].nunique()),
        "alpha": params.alpha, "min_power": v.MIN_POWER,
        **{f"n_{key}": int(counts.get(label, 0)) for key, label in (
            ("reliable", v.RELIABLE), ("low_power", v.LOW_POWER), ("not_reliable", v.NOT_RELIABLE),
            ("within_floor", v.WITHIN_FLOOR))},
        "faithful_text": (f"Faithful-only drops come from {pipeline.similarity_source(similarity)}."
                          if similarity is not None
                          else "This run has no similarity table, so the faithful-only column is empty."),
    })
    # No translated items, no chart: the summary sentence says so.
    out.figures["languages"] = charts.language_verdicts(languages) if len(languages) else None
    out.figures["cells"] = charts.cell_evidence(cells) if len(cells) else None
    moved = explore.moved_items(study.scores, params.aggregate)
    out.figures["explore"] = explore.cell_explorer(
        cells.assign(interval=interval_column(cells["low"], cells["high"])), moved,
        tooltip=[alt.Tooltip("evidence:N"), alt.Tooltip("drop:Q", format=".3f"),
                 alt.Tooltip("interval:N", title="95% interval"), alt.Tooltip("q:Q", format=".3f"),
                 alt.Tooltip("power:Q", format=".0%"), alt.Tooltip("floor:Q", title="model's floor", format=".3f")],
        title="Drop by model and language: pick a cell") if len(cells) else None
    return out


def report_on_items(params: RunParams, item_changes: dict) -> Report:
    """The report a run of the same models with `item_changes` (item_banks, languages) would give,
    worked out from this run's own scores of those versions: each version's score does not depend on
    what else a run scores, so exercise 3's run, scored anew, must find the same."""
    changed = with_changes(params, item_changes, "the items' changes")
    items, _, _ = pipeline.select_run_items(**pipeline.item_settings(changed))
    return report(params, only_items=items["item_id"])  # a ValueError where this run lacks some of them

