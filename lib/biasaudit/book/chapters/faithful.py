"""Chapter 16: are the drops an artefact of bad translations? Faithful translations only, and each
language against rewording, item by item."""

from __future__ import annotations

import pandas as pd

from biasaudit import analyses
from biasaudit.analyses import verdict
from biasaudit.book import charts, paper
from biasaudit.book.prose import language_names
from biasaudit.book.report import Report, TableStyle, note, spoken_list, with_interval
from biasaudit.data.languages import language_label
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

# Each drop with its 95% interval in one cell ("value [low, high]"), so the table fits the page.
FAITHFUL_STYLE = TableStyle(columns={
    "language": "language", "n_all": "pairs", "n_faithful": "faithful pairs", "share_faithful": "share faithful",
    "n_unjudged": "not judged", "shown_all": "drop, all [95%]", "shown_faithful": "drop, faithful only [95%]",
    "shown_reduction": "reduction [95%]"}, percent=("share_faithful",),
    caption="A language's drop with all translations carries the book's one interval of that drop (chapters 10 and 22); "
            "the faithful-only drop and the reduction carry bootstraps over items of their own (the reduction's "
            "paired: each resample gives both drops).")
TESTS_STYLE = TableStyle(columns={
    "subset": "subset", "language": "language", "n_items": "items", "translation_drop": "translation drop",
    "rewording_drop": "rewording drop", "shown_excess": "excess drop [95%]", "p": "p", "q": "q",
    "reliable": "reliable", "verdict": "verdict (chapter 22)"}, decimals=4, formats={"language": language_label})


KEPT_STYLE = TableStyle(decimals=3, formats={"pairs": "{:,}"}, fold_constant=False,
                        caption="Drop per language (English mean − language mean over model × version pairs; "
                                "positive: lower than English), their mean with the languages weighted equally, "
                                "and the carry-over slope over every pair of the subset.")


def kept_wide(kept: pd.DataFrame) -> pd.DataFrame:
    """One row per subset of translations kept, as the paper's Table 6: pairs, the drop per language, the
    languages' equal-weight mean, the slope."""
    if kept.empty:
        return pd.DataFrame(columns=["translations kept", "pairs"])
    languages = kept.loc[kept["language"] != "mean"]
    wide = languages.pivot(index="subset", columns="language", values="drop")
    wide.columns = [language_label(code) for code in wide.columns]
    mean = kept.loc[kept["language"] == "mean"].set_index("subset")
    out = pd.concat([mean["n_pairs"].rename("pairs"), wide, mean["drop"].rename("languages weighted equally"),
                     mean["slope"].rename("slope")], axis=1)
    out = out.reindex([s for s in analyses.KEPT_SUBSETS if s in out.index])
    return out.rename_axis("translations kept").reset_index()


def kept_text(kept: pd.DataFrame) -> str:
    mean = kept.loc[kept["language"] == "mean"].set_index("subset")
    if "faithful, equal fluency" not in mean.index:
        return "Without a similarity table only the first row, all translations, can be computed."
    fluent, every = mean.loc["faithful, equal fluency"], mean.loc["all"]
    return (f"Keeping only faithful translations that the models handle as fluently as English (fluency within "
            f"{analyses.FLUENCY_GAP:.1f} of the English version's, no BBQ item) leaves "
            f"{int(fluent['n_pairs']):,} of {int(every['n_pairs']):,} pairs; their drop, the languages weighted "
            f"equally, is {fluent['drop']:.3f} against {every['drop']:.3f} with every translation.")


def judged_text(params: RunParams, scores: pd.DataFrame, similarity: pd.DataFrame | None) -> str:
    translated = scores.loc[scores["variant"] == "translation", "item_id"].drop_duplicates()
    if similarity is None:
        return (f"This run has no similarity table ({params.similarity_file} is not in runs/{params.run_name}/), so "
                "faithful translations cannot be told apart from the others here: the drops with faithful "
                "translations only and the subset faithful in every language below are left out, and the item-level "
                "test runs on all items.")
    judged = analyses.version_similarity(similarity, threshold=params.faithful_threshold)
    judged = judged.loc[judged["item_id"].isin(translated)]
    kinds = (similarity.loc[similarity["item_id"].isin(translated), "kind"].dropna().unique().tolist()
             if "kind" in similarity else [])
    return (f"The similarity table judges {len(judged)} of the run's {len(translated)} translated versions"
            + (f" (similarity of kind: {', '.join(map(str, kinds))})" if kinds else "")
            + f"; {int(judged['faithful'].sum())} of them ({judged['faithful'].mean():.0%}) reach the threshold of "
            f"{params.faithful_threshold:.2f}.")


def faithful_text(faithful: pd.DataFrame) -> str:
    if faithful.empty:
        return "Without a similarity table this comparison cannot be made for this run."
    mean = faithful.loc[faithful["language"] == "mean"].iloc[0]
    share = (f", {mean['reduction'] / mean['drop_all']:.0%} of the drop"
             if mean["drop_all"] > 0 and mean["reduction"] > 0 else "")
    return (f"Averaged over languages with equal weight, the drop is {mean['drop_all']:.3f} with all translations and "
            f"{mean['drop_faithful']:.3f} with faithful ones only: the reduction (all minus faithful only) is "
            f"{mean['reduction']:.3f}, 95% paired interval {mean['reduction_low']:.3f} to "
            f"{mean['reduction_high']:.3f}{share}.")


def tests_text(tests: pd.DataFrame, verdicts: pd.Series) -> str:
    """Per subset, the languages where translation reliably moves items more (or less) than rewording, and
    for each the verdict of chapter 22 where it is not a real shift, with why the two can differ.

    `verdicts` maps a language code to its verdict (`Study.language_verdicts`)."""
    lines, other = [], {}
    for subset, rows in tests.groupby("subset", sort=False):
        more = rows.loc[rows["reliable"] & (rows["excess_drop"] > 0), "language"].tolist()
        less = rows.loc[rows["reliable"] & (rows["excess_drop"] < 0), "language"].tolist()
        line = (f"{subset} ({int(rows['n_items'].max())} items at most per language): in {len(more)} of {len(rows)} "
                f"languages translation reliably lowers the score more than rewording does"
                + (f" ({language_names(more)})" if more else ""))
        if less:
            line += f", and in {len(less)} reliably less ({language_names(less)})"
        lines.append(line)
        other.update({c: verdicts[c] for c in (*more, *less) if c in verdicts and verdicts[c] != verdict.REAL})
    if not lines:
        return "This run has no items with both translations and rewordings."
    text = "; ".join(lines) + "."
    if other:
        named = spoken_list([f"{language_label(c)} \"{other[c]}\"" for c in other])  # glued text: no Markdown
        text += (f" The verdict of chapter 22 calls {named}: this test asks whether the items' translation drop exceeds "
                 "their own rewording drop on average (the excess against zero); the verdict asks more, that the "
                 "language's whole 95% interval lie beyond every model's noise floor.")
    return text


def subsets_text(tests: pd.DataFrame, similarity: pd.DataFrame | None, threshold: float) -> str:
    missing = []
    if similarity is None:
        missing.append("the subset faithful in every language needs the similarity table")
    elif "faithful in every language" not in set(tests["subset"]):
        missing.append(f"no item is translated faithfully into every language at the threshold {threshold:.2f}, "
                       "so the subset faithful in every language is empty")
    if "without StereoSet" not in set(tests["subset"]):
        missing.append("the subset without StereoSet is left out because the run has no translated StereoSet items "
                       "(it would repeat the first)")
    return (" Not shown: " + "; ".join(missing) + ".") if missing else ""


def faithful_long(faithful: pd.DataFrame) -> pd.DataFrame:
    """Both drops per language in one column, for a forest plot."""
    return pd.concat([
        faithful.assign(translations="all", drop=faithful["drop_all"], low=faithful["drop_all_low"],
                        high=faithful["drop_all_high"]),
        faithful.assign(translations="faithful only", drop=faithful["drop_faithful"],
                        low=faithful["drop_faithful_low"], high=faithful["drop_faithful_high"]),
    ], ignore_index=True)


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    similarity = pipeline.read_similarity(params)
    options = study.options
    if similarity is not None:
        faithful = analyses.faithful_only(study.scores, similarity, options, threshold=params.faithful_threshold)
    else:
        faithful = pd.DataFrame(columns=["language", "n_all", "n_faithful", "share_faithful", "n_unjudged"] + [
            f"{column}{end}" for column in ("drop_all", "drop_faithful", "reduction") for end in ("", "_low", "_high")])
    shared = study.language_drops().set_index("language")
    own = faithful["language"].isin(shared.index)
    for column, source in (("drop_all", "drop"), ("drop_all_low", "drop_low"), ("drop_all_high", "drop_high")):
        faithful.loc[own, column] = faithful.loc[own, "language"].map(shared[source]).to_numpy()
    judgments = pipeline.read_judgments(params)
    tests = analyses.against_rewording(study.scores, similarity, options, threshold=params.faithful_threshold,
                                       judgments=judgments)
    kept = analyses.kept_translations(study.scores, similarity, options, threshold=params.faithful_threshold)
    out = Report()
    folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
    if folder:
        quality = paper.read_json(folder, "translation_quality.json")
        out.figures["paper"] = paper.block(
            paper.judgment_rows(quality, judgments)
            + paper.item_level_rows(quality, tests, params.n_permutations, params.n_bootstrap)
            + paper.kept_rows(paper.read_json(folder, "robustness_checks.json"), kept)
            + paper.faithful_rows(paper.read_json(folder, "review2_checks.json"), faithful, params.n_bootstrap),
            "translation_quality.json, robustness_checks.json, review2_checks.json")
    else:
        out.figures["paper"] = None
    out.add_table("faithful", faithful.assign(**{
        f"shown_{name}": with_interval(faithful[column], faithful[f"{column}_low"], faithful[f"{column}_high"], 4)
        for name, column in (("all", "drop_all"), ("faithful", "drop_faithful"), ("reduction", "reduction"))}),
        FAITHFUL_STYLE)
    out.add_table("kept", kept_wide(kept), KEPT_STYLE)
    verdicts = study.language_verdicts()
    out.add_table("tests", tests.assign(shown_excess=with_interval(tests["excess_drop"], tests["low"], tests["high"], 4))
                  .merge(verdicts[["language", "verdict"]], on="language", how="left"), TESTS_STYLE)
    out.values.update({
        "judged_text": judged_text(params, study.scores, similarity), "faithful_text": faithful_text(faithful),
        "kept_text": kept_text(kept),
        "tests_text": tests_text(tests, verdicts.set_index("language")["verdict"]),
        "subsets_text": subsets_text(tests, similarity, params.faithful_threshold),
    })
    if similarity is not None:
        out.figures["faithful"] = charts.forest(
            faithful_long(faithful), label="language", estimate="drop", low="low", high="high", color="translations",
            title="Drop with all and with faithful translations (95% bootstrap intervals)")
    else:
        out.figures["faithful"] = note("No similarity table in this run: nothing to draw.")
    out.figures["tests"] = charts.forest(
        tests, label="language", estimate="excess_drop", low="low", high="high", color="subset",
        x_title="excess drop: translation drop − rewording drop (soft score)",
        title="Translation against rewording, item by item (95% bootstrap intervals)")
    return out
