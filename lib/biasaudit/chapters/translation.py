"""Chapter 01: are the item versions faithful? How versions are made and how a translation is judged."""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasaudit import charts, judge, translate
from biasaudit.items import read_items
from biasaudit.params import RunParams
from biasaudit.paths import project_path, run_dir
from biasaudit.report import Report, TableStyle
from biasaudit.runstore import write_atomically

SUMMARY_STYLE = TableStyle(columns={
    "kind": "kind", "language": "language", "via": "made by", "n": "versions", "median": "median similarity",
    "unrelated_mean": "unrelated pairs (mean)", "separated": "above the unrelated 95th percentile",
    "faithful": "at or above the threshold"}, percent=("separated", "faithful"))


def bank(params: RunParams) -> pd.DataFrame:
    return pd.concat([read_items(project_path(path)) for path in params.item_banks], ignore_index=True)


def report(params: RunParams) -> Report:
    """Judge the bank's human translations, and show what a (poor) machine translator looks like."""
    items = bank(params)
    originals = items.loc[items["variant"] == "original"]
    human = items.loc[(items["variant"] == "translation") & items["language"].isin(params.languages)]
    english_rewordings = items.loc[(items["variant"] == "rewording") & (items["language"] == "en")]
    out = Report()
    out.values.update({"n_originals": len(originals), "n_human": len(human),
                       "n_languages": int(human["language"].nunique()), "threshold": params.faithful_threshold})
    versions = (items.loc[items["language"].isin([*params.languages, "en"])].groupby(["variant", "via"]).size()
                .rename("versions").reset_index())
    out.add_table("versions", versions)

    # --- the judge on the human translations
    embed = judge.load_embedder(params.embedder)
    judged = pd.concat([human, english_rewordings], ignore_index=True)
    similarity = judge.similarity_table(items, judged, embed, threshold=params.faithful_threshold)
    unrelated = judge.unrelated_similarity(items, judged, embed, seed=params.seed)
    similarity = judge.calibrate(similarity, unrelated)
    summary = judge.similarity_summary(similarity, unrelated)
    write_atomically(similarity, run_dir(params.run_name) / "similarity.parquet")
    out.add_table("summary", summary, SUMMARY_STYLE)
    cross = summary.loc[summary["kind"] == "cross-lingual"].set_index("language")
    rewordings = summary.loc[summary["kind"] == "monolingual"]
    out.values.update({
        "embedder_name": embed.name,
        "median_low": float(cross["median"].min()), "median_low_language": str(cross["median"].idxmin()),
        "median_high": float(cross["median"].max()), "median_high_language": str(cross["median"].idxmax()),
        "faithful_low": float(cross["faithful"].min()), "faithful_low_language": str(cross["faithful"].idxmin()),
        "faithful_high": float(cross["faithful"].max()),
        "unrelated_low": float(cross["unrelated_mean"].min()), "unrelated_high": float(cross["unrelated_mean"].max()),
        "separated_min": float(cross["separated"].min()),
        "rewording_median": float(rewordings["median"].median()) if len(rewordings) else float("nan"),
    })
    pairs = pd.concat([
        similarity.loc[similarity["variant"] == "translation", ["language", "similarity"]].assign(pair="translation"),
        unrelated.loc[unrelated["variant"] == "translation", ["language", "similarity"]].assign(pair="unrelated item"),
    ], ignore_index=True)
    out.figures["similarity"] = charts.similarity_boxes(
        pairs, order=list(params.languages), threshold=params.faithful_threshold,
        title=f"Human translations vs unrelated pairs ({embed.name}); dashed: faithful threshold")
    out.add_table("review", judge.review_table(similarity.loc[similarity["variant"] == "translation"],
                                               params.n_review))

    # --- a machine translator on a sample
    rng = np.random.default_rng(params.seed)
    ids = originals["base_id"].to_numpy()
    chosen = ids if params.n_sample_items == 0 else rng.choice(ids, size=min(params.n_sample_items, len(ids)),
                                                              replace=False)
    sample = originals.loc[originals["base_id"].isin(chosen)]
    targets = list(params.sample_languages) or list(params.languages)
    machine = translate.make_translator(params.translator, kind=params.translator_kind, items=items,
                                        batch_size=params.batch_size, device=params.device_or_none, progress=False)
    made = translate.translate_items(sample, machine, targets)
    write_atomically(made.items, run_dir(params.run_name) / "machine_translations.parquet")
    out.add_table("machine_summary", made.summary())
    out.add_table("failed", made.failed, TableStyle(columns={"item_id": "item", "field": "field", "text": "text",
                                                             "reason": "why it failed"}))
    same_items = human.loc[human["base_id"].isin(sample["base_id"]) & human["language"].isin(targets)]
    back = judge.back_translate(made.items, machine)[0] if params.back_translate else None
    machine_similarity = judge.similarity_table(items, made.items, embed, threshold=params.faithful_threshold,
                                                back_translations=back)
    floor = unrelated if back is None else pd.concat(
        [unrelated, judge.unrelated_similarity(items, made.items, embed, seed=params.seed, back_translations=back)])
    machine_similarity = judge.calibrate(machine_similarity, floor)
    human_similarity = similarity.loc[similarity["item_id"].isin(same_items["item_id"])]
    side = pd.concat([human_similarity, machine_similarity], ignore_index=True)
    out.add_table("side_by_side", side.groupby(["via", "kind"])[["similarity", "calibrated", "above_unrelated"]]
                  .median().reset_index())
    references, _ = judge.reference_metrics(made.items, same_items)
    out.add_table("references", references, TableStyle(decimals=1))
    texts = made.items.merge(same_items[["base_id", "language", "context", "stereotyped"]], on=["base_id", "language"],
                             suffixes=("", "_human"))
    out.add_table("texts", texts, TableStyle(columns={
        "item_id": "item", "context": "context (machine)", "context_human": "context (human)",
        "stereotyped": "stereotyped (machine)", "stereotyped_human": "stereotyped (human)"}))
    nan = float("nan")
    out.values.update({
        "translator": params.translator, "machine_made": len(made.items),
        "machine_tried": len(made.items) + len(made.failed),
        "machine_median": float(machine_similarity["similarity"].median()) if len(machine_similarity) else nan,
        "human_median_same": float(human_similarity["similarity"].median()) if len(human_similarity) else nan,
        "machine_calibrated": float(machine_similarity["calibrated"].median()) if len(machine_similarity) else nan,
        "human_calibrated": float(human_similarity["calibrated"].median()) if len(human_similarity) else nan,
        "machine_chrf": float(references["chrf"].mean()) if len(references) else nan,
    })

    # --- English rewordings by round trip
    if params.pivots:
        trips = translate.round_trip(originals, machine, list(params.pivots))
        write_atomically(trips.items, run_dir(params.run_name) / "round_trip_rewordings.parquet")
        trip_similarity = judge.calibrate(judge.similarity_table(items, trips.items, embed,
                                                                 threshold=params.faithful_threshold), unrelated)
        medians = trip_similarity.groupby("via")[["similarity", "calibrated"]].median().add_prefix("median ")
        out.add_table("round_trips", trips.unchanged.merge(medians, left_on="pivot", right_index=True))
        out.values["round_trip_text"] = (f"Round trips through {', '.join(params.pivots)} made "
                                         f"{len(trips.items)} English rewordings; the table shows how much of their "
                                         "text came back unchanged and how similar they are to the originals.")
    else:
        out.add_table("round_trips", pd.DataFrame(), TableStyle(empty=""))
        out.values["round_trip_text"] = ("This run makes no round trips (its pivots parameter is empty): the bank's hand-written "
                                         "English rewordings stand in for them, with the similarities shown above.")
    return out
