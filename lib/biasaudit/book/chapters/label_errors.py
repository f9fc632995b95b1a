"""Chapter 20: how much of an audit's result can a pipeline error make up or erase, without warning?

The three errors are rerun for real on the run's items (`pipeline.ablation_plan` decides what can
be rescored here), and errors 1 and 2 on the paper's released scores when they are at hand.
"""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts
from biasaudit.book.prose import count_noun
from biasaudit.book.report import Report, TableStyle, spoken_list
from biasaudit.data import released
from biasaudit.data.release_files import resolve_released_source
from biasaudit.lm.registry import resolve_model_path
from biasaudit.lm.tokens import boundary_example
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams
from biasaudit.run.steps import read_step

ERRORS_STYLE = TableStyle(columns={
    "setting": "errors switched on", "n_models": "models", "n_items": "items", "english_soft": "English soft",
    "english_binary": "English binary", "n_cells": "cells", "cells_below": "cells below English",
    "reliable_drops": "reliable drops", "slope_rewording": "slope (rewording)",
    "slope_translation": "slope (translation)", "empty_options": "rows with an unscored continuation"}, empty="",
    formats={"setting": lambda setting: setting.replace("_", " ")})  # lines may break between words
EXAMPLE_STYLE = TableStyle(columns={
    "setting": "errors", "model": "model", "item_id": "item", "context": "context", "stereotyped": "stereotyped",
    "anti_stereotyped": "anti-stereotyped", "third": "third", "ntok_stereotyped": "tokens (stereotyped)",
    "ntok_anti_stereotyped": "tokens (anti)", "soft": "soft", "choice": "choice"}, empty="")
# Every table of this chapter sits under a sentence that says why it is empty when it is.
QUIET = TableStyle(empty="")
# The paper's pipeline_ablation.csv, its columns in words (the file's own names in the sentence above it).
ABLATION_STYLE = TableStyle(columns={
    "scorer": "scorer", "labels": "labels", "en_ss": "English soft", "en_bin": "English binary",
    "neg": "cells below English", "sig": "reliable cells", "sig_raw": "p < 0.05 before correction",
    "gap_lo": "gap interval, low", "gap_hi": "gap interval, high", "slope_tr": "slope (translation)",
    "slope_rw": "slope (rewording)", "inf_rows": "rows with an empty continuation"}, empty="")
ABLATION_TEXT = (
    "The release folder also holds the paper's own ablation (pipeline_ablation.csv, all ten models; scorer v1 had "
    "the boundary error, v2 is fixed; labels raw or fixed), shown below as published, its columns named in words: "
    "the English soft score (en_ss in the file), binary score (en_bin), cells below English (neg), reliable cells "
    "(sig) and, as we read the file's sig_raw (its counts are never below sig's), cells with p < 0.05 before the "
    "correction, the interval of the gap (gap_lo, gap_hi), the slopes for translation and rewording (slope_tr, "
    "slope_rw), and the rows with an empty continuation (inf_rows).")
NO_ABLATION = ("The paper's own ablation of these errors (pipeline_ablation.csv) is not in a release folder on this "
               "machine, so it is not shown.")
NAMES = {"stereoset": "StereoSet", "bbq": "BBQ"}


def label_map_text(example: pd.DataFrame) -> str:
    if example.empty:
        return "No StereoSet item is available to this run (see above), so this error has no example here."
    row, wrong = example.iloc[0], example.loc[example["setting"] != "none"].iloc[0]
    if example["stereotyped"].isna().any():
        return (f"Item {row['item_id']} of the paper's released scores (which carry no continuation texts): the "
                f"log-prob stored as the stereotype's belongs to the anti-stereotypical sentence and the reverse, so "
                f"{row['model']}'s soft score is {wrong['soft']:.3f} as released and {row['soft']:.3f} once fixed, the "
                "same number mirrored around 0.5.")
    return (f"Item {row['item_id']}: the context is \"{row['context']}\". Read correctly, the stereotyped continuation "
            f"is \"{row['stereotyped']}\" and the anti-stereotyped one \"{row['anti_stereotyped']}\"; with the label "
            f"map they trade places. The soft score is the same number mirrored around 0.5 ({row['soft']:.3f} against "
            f"{wrong['soft']:.3f} for {row['model']}): over StereoSet, every lean to the stereotype becomes a lean "
            "away from it.")


def roles_text(example: pd.DataFrame) -> str:
    if example.empty:
        return "No BBQ item is available to this run (see above), so this error has no example here."
    row, wrong = example.iloc[0], example.loc[example["setting"] != "none"].iloc[0]
    if example["stereotyped"].isna().any():
        return (f"Item {row['item_id']} of the paper's released scores (which carry no continuation texts): its roles "
                f"were taken by answer order, so {row['model']}'s soft score is {wrong['soft']:.3f} as released and "
                f"{row['soft']:.3f} with the roles recovered from the metadata.")
    moved = (" (the unknown answer is not on the short list, so it is scored as a person)"
             if row["third"] != wrong["third"] else "")
    return (f"Item {row['item_id']}: \"{row['context']}\" Recovered from the metadata, the stereotyped answer is "
            f"\"{row['stereotyped']}\", the anti-stereotyped one \"{row['anti_stereotyped']}\" and the unknown one "
            f"\"{row['third']}\". By order: \"{wrong['stereotyped']}\", \"{wrong['anti_stereotyped']}\" and "
            f"\"{wrong['third']}\"{moved}. The soft score of {row['model']} moves from {row['soft']:.3f} to "
            f"{wrong['soft']:.3f}.")


def boundary_tokens(example: pd.DataFrame, items: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The tokens each scorer scores in the example item, and the sentence that explains them."""
    if example.empty:
        return pd.DataFrame(), ("The scorer error needs rescoring, which this run cannot do (no texts or no models "
                                "here); the paper's own ablation below compares its first scorer, which had this "
                                "error, with the fixed one.")
    from transformers import AutoTokenizer

    row, wrong = example.iloc[0], example.loc[example["setting"] != "none"].iloc[0]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(row["model"]))
    language = items.set_index("item_id")["language"].get(row["item_id"], "en")
    tokens = boundary_example(tokenizer, row["context"], row["stereotyped"], language)
    text = (f"For item {row['item_id']} (\"{row['context']}\" + \"{row['stereotyped']}\"), the table lists the tokens "
            f"of {row['model']}'s tokenizer and which ones each scorer scores. The stereotyped continuation has "
            f"{count_noun(int(row['ntok_stereotyped']), 'scored token')} with the correct scorer and "
            f"{int(wrong['ntok_stereotyped'])} with the error; the soft score of {row['model']} moves from "
            f"{row['soft']:.3f} to {wrong['soft']:.3f}.")
    return tokens.loc[tokens["part"] == "continuation"], text


def run_text(errors: pd.DataFrame, per_source: pd.DataFrame) -> str:
    if errors.empty:
        return "No rerun was possible on this run's items (see above)."
    plain = errors.loc[errors["setting"] == "none"].iloc[0]
    worst = errors.loc[errors["setting"] == " + ".join(analyses.ERROR_FLAGS)].iloc[0]
    boundary = errors.loc[errors["setting"] == "scorer_boundary"].iloc[0]
    english_by = per_source.pivot(index="setting", columns="source", values="english_soft")
    parts = [f"on its own, {flag} moves the English soft score of the {NAMES[source]} items from "
             f"{english_by.loc['none', source]:.3f} to {english_by.loc[flag, source]:.3f}"
             for source, flag in (("stereoset", "stereoset_label_map"), ("bbq", "bbq_roles_by_order"))
             if source in english_by.columns]
    sources = ("; ".join(parts)[:1].upper() + "; ".join(parts)[1:] + ". " if parts else
               "The run's items include no StereoSet or BBQ item, so errors 1 and 2 leave every number unchanged "
               "here. ")
    empty = (f", and leaves {int(boundary['empty_options'])} model × version rows with an unscored continuation."
             if boundary["empty_options"] else ".")
    return (f"Without errors, the rescored items' English soft score is {plain['english_soft']:.3f} (binary "
            f"{plain['english_binary']:.3f}); {plain['cells_below']} of {plain['n_cells']} cells fall below English and "
            f"{plain['reliable_drops']} of them reliably; the carry-over slope is {plain['slope_rewording']:.2f} for "
            f"rewording and {plain['slope_translation']:.2f} for translation. With all three errors: English "
            f"{worst['english_soft']:.3f} (binary {worst['english_binary']:.3f}), {worst['cells_below']} cells below "
            f"English, {worst['reliable_drops']} reliable, slopes {worst['slope_rewording']:.2f} and "
            f"{worst['slope_translation']:.2f}. {sources}The boundary error alone moves the English soft score to "
            f"{boundary['english_soft']:.3f} and the translation slope to {boundary['slope_translation']:.2f}{empty}")


def as_run_text(as_run: pd.DataFrame, same: pd.DataFrame) -> str:
    """Why the page shows the released label errors twice."""
    if as_run.empty:
        return ""
    unrecoverable = int(as_run["n_items"].max() - same["n_items"].max())
    return (f"The first table runs each combination as its own pipeline would: a pipeline with error 2 cannot know "
            f"which BBQ items are unrecoverable and scores all of them as stored ({int(as_run['n_items'].max())} "
            f"English items), while one that fixes BBQ leaves out the {unrecoverable} it cannot recover; this is how "
            "the paper's Table 16 was made. The second keeps the same items in every row, so that it shows the "
            "errors alone, with no change of items mixed in.")


ERROR_SOURCES: dict[str, str] = {"stereoset_label_map": "stereoset", "bbq_roles_by_order": "bbq"}


def applicable(errors: pd.DataFrame, sources: set[str]) -> pd.DataFrame:
    """The settings whose errors can touch the rescored items: errors 1 and 2 change only StereoSet and
    BBQ items, so a setting that switches one on over items without its source repeats a setting
    without it, and is left out."""
    keep = pd.Series(True, index=errors.index)
    for flag, source in ERROR_SOURCES.items():
        if source not in sources and flag in errors:
            keep &= ~errors[flag].astype(bool)
    return errors.loc[keep].reset_index(drop=True)


def left_out_text(errors: pd.DataFrame, shown: pd.DataFrame) -> str:
    """Which rows `applicable` left out, and why, for the table's caption sentence."""
    if len(shown) == len(errors):
        return ""
    missing = [(number, NAMES[source]) for number, (flag, source) in enumerate(ERROR_SOURCES.items(), start=1)
               if flag in errors and errors[flag].astype(bool).any() and not shown[flag].astype(bool).any()]
    numbers, sources = [f"{n}" for n, _ in missing], [name for _, name in missing]
    which = (f"errors {' and '.join(numbers)}, which change only those items, would repeat the rows without them"
             if len(missing) > 1 else f"error {numbers[0]}, which changes only those items, would repeat the rows "
             "without it")
    return (f"The rescored items include no {' or '.join(sources)} item, so {which}: the table shows the "
            f"{len(shown)} settings that differ, of {len(errors)}.")


def released_text(released_errors: pd.DataFrame, raw: pd.DataFrame | None) -> str:
    if released_errors.empty or raw is None:
        return ("The paper's released scores are not on this machine, so the real-data case is not shown; "
                "\"make released\" downloads them (the book's released-study part says more).")
    english_raw = analyses.item_scores(raw).query("variant == 'original'")
    fixed = released_errors.loc[released_errors["setting"] == "none"].iloc[0]
    both = released_errors.loc[released_errors["setting"] == "stereoset_label_map + bbq_roles_by_order"].iloc[0]
    hidden = (f" and hides {int(fixed['cells_below'] - both['cells_below'])} of the {int(fixed['cells_below'])} cells "
              "that fall below English." if both["cells_below"] < fixed["cells_below"] else ".")
    return (f"For {spoken_list(sorted(raw['model'].unique()))}: read as released ({english_raw['base_id'].nunique()} "
            f"English items, both errors in), the English soft score is {english_raw['soft'].mean():.3f}; on the "
            f"{int(fixed['n_items'])} items whose roles can be recovered it is {both['english_soft']:.3f} with both "
            f"errors and {fixed['english_soft']:.3f} once fixed (binary {both['english_binary']:.3f} against "
            f"{fixed['english_binary']:.3f}). With the errors, {both['cells_below']} of {both['n_cells']} cells fall "
            f"below English and {both['reliable_drops']} reliably; fixed, {fixed['cells_below']} and "
            f"{fixed['reliable_drops']}. The errors add no noise: they reverse the roles in part of the items, which "
            f"moves the English score from {fixed['english_soft']:.3f} to {both['english_soft']:.3f}{hidden}")


def summary_text(examples: list[bool], errors: pd.DataFrame, per_source: pd.DataFrame,
                 released_errors: pd.DataFrame) -> str:
    """The chapter's Summary: what this page shows, and only that. `examples` says which of the three
    errors got a concrete item above."""
    shown = [what for what, has in zip(("a StereoSet item whose sentences trade roles",
                                        "a BBQ item whose roles come from answer order",
                                        "the tokens the boundary error leaves unscored"), examples) if has]
    parts = [f"Each error is a switch of the real pipeline; shown on a concrete item here: {spoken_list(shown)}."
             if shown else "No error could be shown on a concrete item in this run (see above why)."]
    if errors.empty:
        parts.append("No combination of the errors could be rerun on this run's items.")
    else:
        public = set(per_source["source"]) & {"stereoset", "bbq"} if "source" in per_source else set()
        parts.append("All eight combinations of the errors are rerun on this run's items (the part rescored is said "
                     "above)" + ("" if public else "; with no StereoSet or BBQ item among them, errors 1 and 2 change "
                                                    "nothing here") + ".")
    if not released_errors.empty:
        parts.append("Errors 1 and 2 are also rerun on the paper's released scores, whose raw files carry them.")
    parts.append("None of the errors raises an error or a warning: only checks against the data's own documentation "
                 "(label names, answer metadata, token offsets) catch them.")
    return " ".join(parts)


def released_folder(params: RunParams):
    """The folder of released scores for the real-data case: the run's own, else any on this machine."""
    if params.released_scores:
        return resolve_released_source(params.released_scores)
    return released.find_released()


def rescored_count(params: RunParams) -> int:
    """How many item versions the step's plan rescores under `params`, without rescoring them."""
    items, _, _ = pipeline.read_run_items(params.run_name)
    models = sorted(pipeline.read_scores(params.run_name, models=params.model_filter)["model"].unique())
    return len(pipeline.ablation_plan(params, items, models).items)


def report(params: RunParams) -> Report:
    """The eight reruns as the run's step left them (`run.pipeline.run_error_reruns`), and the paper's
    released scores with their label errors (read here: files, no model)."""
    options = params.options
    items, _, _ = pipeline.read_run_items(params.run_name)
    step = read_step(params, "label_errors")
    planned = step["plan_items"]
    out = Report()
    out.values["plan_text"] = step.values["plan_text"]
    reruns = step["reruns"] if step.values["rerun"] else None
    out.values["n_rescored"] = len(planned)
    out.add_table("versions", planned.groupby(["source", "variant", "language"]).size().rename("item versions")
                  .reset_index() if len(planned) else pd.DataFrame(), QUIET)
    folder = released_folder(params)
    raw = released.load_released(folder, fix_labels=False).scores if folder is not None else None
    label_fix = released.read_label_fix(released.load_released(folder).summary["label_fix"]) if folder else None
    released_settings = analyses.released_label_settings(raw, label_fix) if folder is not None else None
    as_run = (analyses.released_label_settings(raw, label_fix, same_items=False) if folder is not None else None)
    examples = reruns if reruns is not None else released_settings
    for number, flag, source, explain in ((1, "stereoset_label_map", "stereoset", label_map_text),
                                          (2, "bbq_roles_by_order", "bbq", roles_text)):
        example = (analyses.error_example(examples, flag, source=source, options=options)
                   if examples is not None else pd.DataFrame())
        out.add_table(f"example_{number}", example, EXAMPLE_STYLE)
        out.values[f"example_{number}"] = explain(example)
    example = (analyses.error_example(reruns, "scorer_boundary", options=options)
               if reruns is not None else pd.DataFrame())
    tokens, out.values["example_3"] = boundary_tokens(example, items)
    out.add_table("example_3", example, EXAMPLE_STYLE)
    out.add_table("tokens", tokens, QUIET)
    if reruns is not None:
        errors = analyses.label_errors(reruns, options)
        per_source = analyses.label_errors(reruns, options, by="source")
    else:
        errors = per_source = pd.DataFrame(columns=[*analyses.ERROR_FLAGS, "setting", "source", "english_soft"])
    shown = applicable(errors, set(planned["source"]) if len(planned) else set())
    out.values["left_out_text"] = left_out_text(errors, shown)
    out.add_table("errors", shown, ERRORS_STYLE)
    out.add_table("per_source", per_source.pivot_table(index="setting", columns="source", values="english_soft")
                  .reindex(shown["setting"]).reset_index() if len(per_source) else pd.DataFrame(), QUIET)
    out.values["run_text"] = run_text(errors, per_source)
    out.figures["errors"] = (charts.paired_bars(shown, label="setting", columns={"english_soft": "soft",
                                                                                 "english_binary": "binary"},
                                                what="score", x_title="English score (0.5 = no preference)",
                                                title="English score under each combination of errors")
                             if len(shown) else None)
    released_errors = (analyses.label_errors(released_settings, options.but(aggregate="mean"))
                       if released_settings is not None else pd.DataFrame())
    released_as_run = (analyses.label_errors(as_run, options.but(aggregate="mean"))
                       if as_run is not None else pd.DataFrame())
    out.add_table("released_as_run", released_as_run, ERRORS_STYLE)
    out.add_table("released_errors", released_errors, ERRORS_STYLE)
    out.values["released_text"] = released_text(released_errors, raw)
    out.values["as_run_text"] = as_run_text(released_as_run, released_errors)
    ablation = folder / "pipeline_ablation.csv" if folder is not None else None
    has_ablation = ablation is not None and ablation.exists()
    out.add_table("paper_ablation", pd.read_csv(ablation) if has_ablation else pd.DataFrame(), ABLATION_STYLE)
    out.values["ablation_text"] = ABLATION_TEXT if has_ablation else NO_ABLATION
    out.values["summary_text"] = summary_text([not out.tables[f"example_{k}"].empty for k in (1, 2, 3)], errors,
                                              per_source, released_errors)
    return out
