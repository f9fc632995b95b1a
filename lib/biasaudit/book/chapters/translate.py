"""Chapter 01: are the item versions faithful? How versions are made and how a translation is judged."""

from __future__ import annotations

import pandas as pd

from biasaudit.book import charts
from biasaudit.book.prose import count_noun, extremes, reasons_sentence, value_range
from biasaudit.book.report import Report, TableStyle
from biasaudit.run.params import RunParams, validate_params
from biasaudit.run.steps import read_step, step_params
from biasaudit.translate import judge
from biasaudit.translate.step import bank, sample_originals

REVIEW_STYLE = TableStyle(columns={
    "item_id": "item", "language": "language", "kind": "judged", "similarity": "similarity",
    "above_unrelated": "share of unrelated pairs below", "original": "English (stereotyped / anti-stereotyped)",
    "version": "translation (stereotyped / anti-stereotyped)"})
SUMMARY_STYLE = TableStyle(columns={
    "kind": "kind", "language": "language", "via": "made by", "n": "versions", "median": "median similarity",
    "unrelated_mean": "unrelated pairs (mean)", "separated": "above the unrelated 95th percentile",
    "faithful": "at or above the threshold"}, percent=("separated", "faithful"))


def percent(value: float) -> str:
    return f"{value:.0%}"


def judge_text(cross: pd.DataFrame, embedder: str) -> str:
    """How far the judge tells the human translations from unrelated items; `cross` is the
    cross-lingual rows of `judge.similarity_summary`, indexed by language."""
    if cross.empty:
        return "This run judges no human translation (its languages have none in the bank), so there is nothing to read."
    three = "{:.3f}".format
    text = (f"With {embedder}, the median cross-lingual similarity of the human translations is "
            f"{extremes(cross['median'], three)}, while unrelated pairs average "
            f"{value_range(cross['unrelated_mean'].min(), cross['unrelated_mean'].max(), 3)}. ")
    separated = cross["separated"].dropna()
    if separated.empty:
        return text + "No unrelated pairs were drawn, so the judge cannot be checked against them here."
    share = extremes(separated, percent)
    if separated.min() >= 0.9:
        verdict = "the judge tells a translation from a different item."
    elif separated.min() >= 0.5:
        verdict = "the judge tells most translations from a different item, but not all."
    else:
        verdict = "in some language the judge cannot tell a translation from a different item."
    return text + (f"The share of translations above the 95th percentile of the unrelated pairs is {share}: "
                   f"{verdict}")


def faithful_text(cross: pd.DataFrame, threshold: float) -> str:
    """What a fixed threshold does to equally careful translations in different languages."""
    faithful = cross["faithful"].dropna() if "faithful" in cross else pd.Series(dtype=float)
    if faithful.empty:
        return ""
    text = f"At the fixed threshold of {threshold:g}, the share of \"faithful\" translations is {extremes(faithful, percent)}"
    if faithful.max() - faithful.min() >= 0.2:
        return text + ", although the same team wrote all of them with the same care."
    if len(faithful) > 1:
        return text + ": close across languages in this run, but the reason below holds whatever the run."
    return text + "."


def faithful_text_at(params: RunParams, threshold: float) -> str:
    """`faithful_text` at another threshold, from the run's judged similarities: a threshold only draws
    the line, it does not change a similarity, so the step need not run again to say it."""
    similarity = read_step(params, "translate")["similarity"]
    summary = judge.similarity_summary(similarity.assign(faithful=similarity["similarity"] >= threshold))
    return faithful_text(summary.loc[summary["kind"] == "cross-lingual"].set_index("language"), threshold)


def planned_attempts(params: RunParams) -> int:
    """How many item translations the machine translator is asked for (the seeded sample × the target
    languages), known before it writes a word: what a rerun with other sample settings attempts."""
    items = bank(params)
    sample = sample_originals(items.loc[items["variant"] == "original"], params.n_sample_items, params.seed)
    return len(sample) * len(list(params.sample_languages) or list(params.languages))


def planned_attempts_after(run_name: str, n_sample_items: int) -> int:
    """What chapter 01 attempts when rerun on run `run_name` with another sample size (chapter 31's
    exercise 4): the params its step last ran with, the sample size changed."""
    recorded = step_params(run_name, "translate")
    if recorded is None:
        raise ValueError(f"run {run_name!r} has not run chapter 01's step, so there is no sample to enlarge")
    return planned_attempts(validate_params({**recorded, "n_sample_items": n_sample_items}, "chapter 01's step"))


def machine_text(*, tried: int, made: int, reasons: list[str], machine_median: float, human_median: float,
                 machine_calibrated: float, human_calibrated: float, chrf: float) -> str:
    """The machine translator's sample against the human translations of the same items."""
    if tried == 0:
        return "This run asks the machine translator for no item (n_sample_items is 0 or no language was chosen)."
    if made == 0:
        return (f"None of the {count_noun(tried, 'item translation')} attempted passed the cleaning rules, so there "
                f"is no machine translation to judge here. {reasons_sentence(reasons, 'failure')}").strip()
    text = (f"Of {count_noun(tried, 'item translation')} attempted, {made} passed the cleaning rules. Their median "
            f"similarity to the English originals is {machine_median:.3f}, against {human_median:.3f} for the human "
            f"translations of the same items; on the calibrated scale (0 = an unrelated item, 1 = identical) that is "
            f"{machine_calibrated:.2f} against {human_calibrated:.2f}, and their chrF against the human translations "
            f"averages {chrf:.1f} of 100.")
    if machine_calibrated < 0.3:
        text += (" Read raw, such a cosine can sound respectable; read against the unrelated floor, a calibrated score "
                 "this low says these versions are about as close to their items as different items are.")
    elif machine_calibrated < human_calibrated - 0.2:
        text += " The calibrated score puts them well below the human translations."
    else:
        text += " On the calibrated scale they come close to the human translations."
    return text


def judge_summary(cross: pd.DataFrame) -> str:
    """The Summary's sentence on the judge, as this run found it."""
    separated = cross["separated"].dropna() if "separated" in cross else pd.Series(dtype=float)
    if separated.empty:
        return "This run has no human translation judged against unrelated items, so the judge is not checked here."
    how = ("separates the bank's human translations from unrelated items in every language of this run" if
           separated.min() >= 0.9 else "does not separate every language's human translations from unrelated items "
           "in this run")
    return (f"Embedding similarity {how}, and its raw level depends on the language pair: a fixed threshold on a "
            "cross-lingual cosine says as much about the embedder as about the translation.")


def machine_summary(*, made: int, machine_calibrated: float) -> str:
    """The Summary's sentence on the machine translator, as this run found it."""
    if made == 0:
        return ("No machine translation of this run survived the cleaning rules, so only the human translations are "
                "judged here.")
    if machine_calibrated < 0.3:
        return ("The machine translations that survive cleaning get raw cosines that sound high, yet against the "
                "unrelated floor and by chrF they are plainly poor. Judge translations with both, on known-good and "
                "known-bad examples.")
    return ("The machine translations that survive cleaning are judged against the unrelated floor and by chrF as "
            "well as by raw cosine; read the three together, on known-good and known-bad examples.")


def report(params: RunParams) -> Report:
    """The human translations judged, and what a (poor) machine translator made: read from the
    tables of the run's translate step (`biasaudit.translate.step.run_translation`)."""
    step = read_step(params, "translate")
    items = bank(params)
    originals = items.loc[items["variant"] == "original"]
    human = items.loc[(items["variant"] == "translation") & items["language"].isin(params.languages)]
    out = Report()
    out.values.update({"n_originals": len(originals), "n_human": len(human),
                       "n_languages": int(human["language"].nunique()), "threshold": params.faithful_threshold})
    versions = (items.loc[items["language"].isin([*params.languages, "en"])].groupby(["variant", "via"]).size()
                .rename("versions").reset_index())
    out.add_table("versions", versions)

    # --- the judge on the human translations
    similarity, unrelated, embedder = step["similarity"], step["unrelated"], step.values["embedder"]
    summary = judge.similarity_summary(similarity, unrelated)
    out.add_table("summary", summary, SUMMARY_STYLE)
    cross = summary.loc[summary["kind"] == "cross-lingual"].set_index("language")
    rewordings = summary.loc[summary["kind"] == "monolingual"]
    out.values.update({
        "embedder_name": embedder, "judge_text": judge_text(cross, embedder),
        "faithful_text": faithful_text(cross, params.faithful_threshold), "judge_summary": judge_summary(cross),
        "rewording_text": (f"the English rewordings of the bank, compared in the same language, have a median of "
                           f"{rewordings['median'].median():.3f}" if len(rewordings) else
                           "this run has no English rewordings to compare in the same language"),
    })
    pairs = pd.concat([
        similarity.loc[similarity["variant"] == "translation", ["language", "similarity"]].assign(pair="translation"),
        unrelated.loc[unrelated["variant"] == "translation", ["language", "similarity"]].assign(pair="unrelated item"),
    ], ignore_index=True)
    out.figures["similarity"] = charts.similarity_boxes(
        pairs, order=list(params.languages), threshold=params.faithful_threshold,
        title=f"Human translations vs unrelated pairs ({embedder}); dashed: faithful threshold")
    out.add_table("review", judge.review_table(similarity.loc[similarity["variant"] == "translation"],
                                               params.n_review), REVIEW_STYLE)

    # --- a machine translator on a sample
    made, machine_similarity, references = step["machine"], step["machine_similarity"], step["references"]
    sample = sample_originals(originals, params.n_sample_items, params.seed)
    targets = list(params.sample_languages) or list(params.languages)
    out.add_table("machine_summary", step["machine_summary"])
    out.add_table("failed", step["failed"], TableStyle(columns={"item_id": "item", "field": "field", "text": "text",
                                                                "reason": "why it failed"}))
    same_items = human.loc[human["base_id"].isin(sample["base_id"]) & human["language"].isin(targets)]
    human_similarity = similarity.loc[similarity["item_id"].isin(same_items["item_id"])]
    side = pd.concat([human_similarity, machine_similarity], ignore_index=True)
    out.add_table("side_by_side", side.groupby(["via", "kind"])[["similarity", "calibrated", "above_unrelated"]]
                  .median().reset_index())
    out.add_table("references", references, TableStyle(decimals=1))
    texts = made.merge(same_items[["base_id", "language", "context", "stereotyped"]], on=["base_id", "language"],
                       suffixes=("", "_human"))
    out.add_table("texts", texts, TableStyle(columns={
        "item_id": "item", "context": "context (machine)", "context_human": "context (human)",
        "stereotyped": "stereotyped (machine)", "stereotyped_human": "stereotyped (human)"}))
    nan = float("nan")
    # a version fails once per field that failed, so the attempts are the versions made and those that failed
    tried = len(made) + int(step["failed"]["item_id"].nunique())
    out.values.update({
        "translator": params.translator, "n_tried": tried, "n_made": len(made),
        "machine_text": machine_text(
            tried=tried, made=len(made), reasons=list(step["failed"]["reason"]),
            machine_median=float(machine_similarity["similarity"].median()) if len(machine_similarity) else nan,
            human_median=float(human_similarity["similarity"].median()) if len(human_similarity) else nan,
            machine_calibrated=float(machine_similarity["calibrated"].median()) if len(machine_similarity) else nan,
            human_calibrated=float(human_similarity["calibrated"].median()) if len(human_similarity) else nan,
            chrf=float(references["chrf"].mean()) if len(references) else nan),
        "machine_summary": machine_summary(made=len(made), machine_calibrated=float(
            machine_similarity["calibrated"].median()) if len(machine_similarity) else nan),
    })

    # --- English rewordings by round trip
    if params.pivots:
        medians = step["trip_similarity"].groupby("via")[["similarity", "calibrated"]].median().add_prefix("median ")
        out.add_table("round_trips", step["trips_unchanged"].merge(medians, left_on="pivot", right_index=True))
        out.values["round_trip_text"] = (f"Round trips through {', '.join(params.pivots)} made "
                                         f"{len(step['trips'])} English rewordings; the table shows how much of their "
                                         "text came back unchanged and how similar they are to the originals.")
    else:
        out.add_table("round_trips", pd.DataFrame(), TableStyle(empty=""))
        out.values["round_trip_text"] = ("This run makes no round trips (its pivots parameter is empty): the bank's hand-written "
                                         "English rewordings stand in for them, with the similarities shown above.")
    return out
