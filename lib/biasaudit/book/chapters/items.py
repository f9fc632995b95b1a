"""Chapter 00: which test items does this run use, and can each of them still measure a stereotype?"""

from __future__ import annotations

import pandas as pd

from biasaudit.book.prose import collapsed_counts, count_noun
from biasaudit.book.report import Report, TableStyle
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams

TEXT_COLUMNS = {"context": "context", "stereotyped": "stereotyped", "anti_stereotyped": "anti-stereotyped"}


def report(params: RunParams) -> Report:
    """Describe the run's items, as its first step (`run.pipeline.prepare_run`) wrote them."""
    items, collapsed, stages = pipeline.read_run_items(params.run_name)
    originals = items.loc[items["variant"] == "original"]
    out = Report()
    out.values.update({
        "n_bases": len(originals), "n_versions": len(items),
        "n_dimensions": int(originals["dimension"].nunique()), "n_sources": int(originals["source"].nunique()),
        "sources_text": count_noun(int(originals["source"].nunique()), "source"),
        "n_collapsed": len(collapsed), "collapsed_counts": collapsed_counts(collapsed),
        "stages_text": ((("This run imports the paper's released scores, whose items the paper loaded itself"
                          if params.released_scores else "Only the project's own items are in this run")
                         + ", so there are no loading stages to show.") if stages.empty else
                        f"{count_noun(int(stages['source'].nunique()), 'public source')} "
                        f"{'was' if stages['source'].nunique() == 1 else 'were'} loaded; the table counts their "
                        "items at each stage."),
        "collapsed_text": ("No translation in this run lost its contrast." if collapsed.empty else
                           f"The {len(collapsed)} collapsed versions are listed below."),
    })
    out.add_table("counts", version_counts(items))
    out.add_table("dimensions", base_counts(originals))
    out.add_table("stages", stages, TableStyle(columns={"source": "source", "category": "category",
                                                        "stage": "stage", "n": "items", "reason": "reason"},
                                         empty=""))
    out.add_table("collapsed", collapsed, TableStyle(columns={"item_id": "item", "language": "language",
                                                              "stereotyped": "stereotyped",
                                                              "anti_stereotyped": "anti-stereotyped"}, empty=""))
    examples = originals.groupby(["source", "dimension"], as_index=False).head(1)
    out.add_table("examples", examples, TableStyle(columns={
        "source": "source", "dimension": "dimension", "item_id": "item", **TEXT_COLUMNS, "third": "third option"}))
    first = originals["base_id"].iloc[0] if len(originals) else ""
    out.values["example_item"] = first
    out.add_table("one_item", items.loc[items["base_id"] == first], TableStyle(columns={
        "language": "language", "variant": "variant", "via": "made by", **TEXT_COLUMNS}))
    return out


def versions_kept(params: RunParams, other: RunParams) -> int:
    """How many of this run's item versions a run with `other`'s languages and rewording choice would
    keep: English, its languages, and the rewordings only where it keeps them."""
    items, _, _ = pipeline.read_run_items(params.run_name)
    kept = items["language"].isin(["en", *other.languages])
    if not other.include_rewordings:
        kept &= items["variant"] != "rewording"
    return int(kept.sum())


def version_counts(items: pd.DataFrame) -> pd.DataFrame:
    """Item versions per language and variant (rows) and source (columns): what the run scores in
    each language, in a table as narrow as the sources are few."""
    variants = pd.Categorical(items["variant"], ["original", "rewording", "translation"])
    counts = items.assign(variant=variants).groupby(["variant", "language", "source"], observed=True).size()
    return _with_total(counts.unstack("source", fill_value=0))


def base_counts(originals: pd.DataFrame) -> pd.DataFrame:
    """English base items per social dimension (rows) and source (columns)."""
    return _with_total(originals.groupby(["dimension", "source"]).size().unstack("source", fill_value=0))


def _with_total(counts: pd.DataFrame) -> pd.DataFrame:
    """An `all` column where there is more than one source; the index as columns."""
    if counts.shape[1] > 1:
        counts["all"] = counts.sum(axis=1)
    counts = counts.reset_index().rename_axis(columns=None)
    if "variant" in counts:  # the ordered categorical back to text, for the table's display
        counts["variant"] = counts["variant"].astype(str)
    return counts
