"""Chapter 11: how far does rewording English alone move the scores (the noise floor)?"""

from __future__ import annotations

import pandas as pd

from biasaudit.analyses.floor import model_floors, separate_rewordings
from biasaudit.book import charts, paper
from biasaudit.book.prose import value_range
from biasaudit.book.report import Report, TableStyle
from biasaudit.data import release_items
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study
from biasaudit.translate.judge import Embedder, load_embedder, pairwise_cosine

FLOOR_STYLE = TableStyle(columns={
    "via": "route", "n_models": "models", "n_items": "items", "share_unchanged": "text fields unchanged",
    "floor": "floor (median over models)", "floor_mean": "floor (mean over models)", "noise_only": "noise only",
    "slope": "carry-over slope", "r": "r", "same_choice": "same choice", "n_cells": "cells",
    "reliable_cells": "reliable cells"}, decimals=4, percent=("share_unchanged", "same_choice"))
CELLS_STYLE = TableStyle(columns={
    "model": "model", "via": "route", "n": "items", "drop": "English − reworded", "floor": "floor", "p": "p",
    "q": "q", "reliable": "reliable", "sd": "SD of the changes", "noise_only": "noise only"}, decimals=4)


def floor_against_noise(floor: float, noise_only: float) -> str:
    """What the floor means next to the noise-only value (the |mean| pure scatter gives on average)."""
    if floor <= noise_only:
        return (f"The floor ({floor:.4f}) is no larger than the noise-only value ({noise_only:.4f}): rewording moves "
                "the mean English score no more than pure scatter of this size would on average, which is what no "
                "systematic effect of rewording looks like. The floor is then the size of a mean's random error over "
                "these items: a language drop no larger than it cannot be told apart from that error.")
    return (f"The floor ({floor:.4f}) is larger than the noise-only value ({noise_only:.4f}): rewording shifts the mean "
            "English score somewhat more than pure scatter of this size would on average, so part of the floor is a "
            "systematic effect of the rewording itself, which a translation carries too.")


def above_model_floor(language_cells: pd.DataFrame, floor_cells: pd.DataFrame) -> pd.Series:
    """Per model × language cell: is its |drop| larger than its own model's floor (the mean over the
    model's routes)? Chapter 22 shows the same per cell, so the two chapters count the same cells."""
    model_floor = language_cells["model"].map(model_floors(floor_cells))
    return language_cells["drop"].abs() > model_floor


SUBSET_STYLE = TableStyle(columns={
    "via": "rewording", "n_items": "items", "floor": "floor (median over models)",
    "median_abs_d": "median |change| (median over models)", "sd_d": "SD of the changes (median over models)"},
    decimals=4, empty="")


def llm_text(subset: pd.DataFrame, routes: list[str]) -> str:
    """The release's LLM rewordings, a comparison of their own beside the floor's routes on the same items
    (`separate_rewordings`; "" without them)."""
    separate = subset.loc[~subset["via"].isin(routes)]
    if separate.empty:
        return ""
    llm, same_items = separate.iloc[0], subset.loc[subset["via"].isin(routes)]
    text = (f" The release also rewords {int(llm['n_items'])} English items with an LLM instead of a round trip "
            f"(the paper's Table 3 sets them apart; they are no route of the floor): their floor, the median over "
            f"models of |English − reworded|, is {llm['floor']:.4f}, with a median |change| per item of "
            f"{llm['median_abs_d']:.4f} and an SD of {llm['sd_d']:.4f} (each the median over models)")
    if same_items.empty:
        return text + "."
    floors = value_range(same_items["floor"].min(), same_items["floor"].max(), 4)
    return text + f"; on the same items the round trips' floors are {floors} (the table below)."


def similarity_by_route(fields: pd.DataFrame, embedder: Embedder) -> pd.DataFrame:
    """The paper's "Sim." of Table 3: per route and field, the mean cosine between each field of
    `release_items.rewording_fields` and its original (texts as stored, unit-length embeddings of `embedder`;
    the paper's is the English all-MiniLM-L6-v2), and per route over all three fields ("all"). Columns: pivot,
    field, n_fields, similarity."""
    scored = fields.assign(similarity=pairwise_cosine(embedder, fields["original"].tolist(),
                                                      fields["reworded"].tolist()))
    per_field = scored.groupby(["pivot", "field"], as_index=False).agg(n_fields=("similarity", "size"),
                                                                       similarity=("similarity", "mean"))
    overall = scored.groupby("pivot", as_index=False).agg(n_fields=("similarity", "size"),
                                                          similarity=("similarity", "mean")).assign(field="all")
    return pd.concat([per_field, overall], ignore_index=True)[["pivot", "field", "n_fields", "similarity"]]


def rewording_similarity(fields: pd.DataFrame | None, embedder: str) -> tuple[pd.DataFrame | None, str]:
    """The released rewordings' similarity to their originals with `embedder` (Table 3's "Sim."), or None and why
    it could not be computed."""
    if fields is None:
        return None, "needs the release's rewording texts (noise_floor_paraphrases.json)"
    if not embedder:
        return None, "needs rewording_embedder: sentence-transformers/all-MiniLM-L6-v2 (from the model hub)"
    try:
        return similarity_by_route(fields, load_embedder(embedder)), ""
    except (ImportError, OSError, ValueError) as err:
        reason = str(err).splitlines()[0][:160] if str(err) else type(err).__name__
        return None, f"could not load {embedder} ({reason})"


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    floor = study.noise_floor()
    cells = study.floor_cells()
    language_cells = study.cells()
    out = Report()
    out.add_table("floor", floor, FLOOR_STYLE)
    out.add_table("cells", cells, CELLS_STYLE)
    if floor.empty:
        raise ValueError(f"run {params.run_name!r} has no English rewordings: the noise floor needs them "
                         "(set include_rewordings: true, or use a bank with rewordings)")
    routes = floor.loc[floor["via"] != "all routes"]
    overall = floor.loc[floor["via"] == "all routes"].iloc[0]
    widest, narrowest = routes.loc[routes["floor"].idxmax()], routes.loc[routes["floor"].idxmin()]
    unchanged = overall["share_unchanged"]
    out.values.update({
        "n_routes": len(routes), "route_names": ", ".join(routes["via"]), "n_models": int(overall["n_models"]),
        "n_items": int(overall["n_items"]), "floor_all": float(overall["floor"]),
        "noise_only_all": float(overall["noise_only"]), "floor_widest": float(widest["floor"]),
        "route_widest": str(widest["via"]), "floor_narrowest": float(narrowest["floor"]),
        "route_narrowest": str(narrowest["via"]), "n_above_noise": int((routes["floor"] > routes["noise_only"]).sum()),
        "n_language_cells": len(language_cells),
        "median_language_drop": float(language_cells["drop"].abs().median()),
        "n_language_above_floor": int(above_model_floor(language_cells, cells).sum()),
        "unchanged_text": (f"On average, {unchanged:.0%} of the text fields (context and the three options) came back "
                           "unchanged" if pd.notna(unchanged) else
                           "This run's table carries no texts of the English rewordings, so unchanged fields cannot be "
                           "counted"),
        "n_cells": len(cells), "n_reliable": int(cells["reliable"].sum()),
        "n_reliable_binary": int(cells["reliable_binary"].sum()), "smallest_q": float(cells["q"].min()),
        "mean_slope": float(routes["slope"].mean()), "mean_r": float(routes["r"].mean()),
        "same_choice_all": float(overall["same_choice"]),
        "floor_against_noise": floor_against_noise(float(overall["floor"]), float(overall["noise_only"])),
    })
    subset = separate_rewordings(study.scores, pipeline.read_llm_rewordings(params), study.options)
    out.add_table("llm", subset, SUBSET_STYLE)
    out.values["floor_against_noise"] += llm_text(subset, routes["via"].tolist())
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    if folder:
        fields = paper.rewording_fields(folder)
        similarity, why = rewording_similarity(fields, params.rewording_embedder)
        out.figures["paper"] = paper.block(paper.floor_rows(
            paper.read_json(folder, "paper_numbers.json"), floor, subset,
            release_items.rewording_sameness(fields) if fields is not None else None, similarity, why,
            paper.read_json(folder, "robustness_checks.json").get("llm_floor")),
            "paper_numbers.json, robustness_checks.json")
    else:
        out.figures["paper"] = None
    out.figures["floor"] = charts.floor_bars(floor)
    out.figures["heatmap"] = charts.drop_heatmap(cells, group="via",
                                                 title="English minus reworded English, by model and route")
    return out
