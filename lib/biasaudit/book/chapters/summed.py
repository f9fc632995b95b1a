"""Chapter 17: do the results depend on how a continuation's log-probability is aggregated?"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts, paper
from biasaudit.book.report import Report, TableStyle, spoken_list
from biasaudit.data.languages import language_label
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

TABLE_STYLE = TableStyle(columns={
    "language": "language", "n_items": "items", "n_models": "models", "soft_mean": "soft (mean)",
    "soft_sum": "soft (sum)", "drop_mean": "drop (mean)", "drop_sum": "drop (sum)",
    "reliable_drops_mean": "reliable drops (mean)", "reliable_drops_sum": "reliable drops (sum)",
    "slope_mean": "slope (mean)", "slope_sum": "slope (sum)", "same_binary": "same choice under both",
    "token_gap": "token gap"}, percent=("same_binary",))
NO_SUMS = ("This run's scores carry only per-token mean log-probs (the paper's released scores are of this kind, "
           "unless the release's token_counts.csv is beside them, which make released downloads), so the two "
           "aggregates cannot be compared here. A run this project scored itself (the default run, or "
           "params/sources.yml) keeps both the sums and the token counts.")


def summary_text(table: pd.DataFrame) -> str:
    english = table.loc[table["language"] == "en"].iloc[0]
    others = table.loc[table["language"] != "en"]
    gap = others.loc[others["token_gap"].abs().idxmax()]
    translated_same = (others["same_binary"] * others["n_items"]).sum() / others["n_items"].sum()
    return (f"In English the mean soft score is {english['soft_mean']:.3f} with per-token means and "
            f"{english['soft_sum']:.3f} with sums. Over the {len(others)} languages the mean drop is "
            f"{others['drop_mean'].mean():.3f} with means and {others['drop_sum'].mean():.3f} with sums; "
            f"{int(others['reliable_drops_mean'].sum())} model × language cells show a reliable drop with means "
            f"against {int(others['reliable_drops_sum'].sum())} with sums, and the mean carry-over slope is "
            f"{others['slope_mean'].mean():.2f} against {others['slope_sum'].mean():.2f}. The two aggregates give the "
            f"same binary choice on {english['same_binary']:.0%} of English item versions and {translated_same:.0%} "
            f"of translated ones. The token gap (stereotyped minus anti-stereotyped continuation, in tokens) is "
            f"largest in {language_label(gap['language'])} ({gap['token_gap']:+.2f} tokens on average, against "
            f"{english['token_gap']:+.2f} in English).")


def summable(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows with summed log-probs for both contrasting continuations: all of a run this project scored;
    of the released scores, the translations and English originals the release's token counts cover."""
    sums = [c for c in ("lp_sum_stereotyped", "lp_sum_anti_stereotyped") if c in scores]
    return scores.loc[scores[sums].notna().all(axis=1)] if len(sums) == 2 else scores.iloc[:0]


def coverage_text(scores: pd.DataFrame, kept: pd.DataFrame) -> str:
    """What the comparison leaves out where some rows have no sums (the released rewordings)."""
    if len(kept) == len(scores) or kept.empty:
        return ""
    left = scores.loc[~scores.index.isin(kept.index)]
    kinds = spoken_list(sorted({"English rewordings" if v == "rewording" else f"{v}s" for v in left["variant"]}))
    return (f" The release's token counts cover the translations and the English originals, so the comparison "
            f"runs on those {len(kept):,} model × version rows and leaves out the {len(left):,} rows of {kinds}.")


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    out = Report()
    kept = summable(study.scores)
    if len(kept) and analyses.has_aggregate(kept, "sum"):
        table = study.computed("summed_vs_mean", lambda: analyses.summed_vs_mean(kept, study.options), len(kept))
        out.values["summary_text"] = summary_text(table) + coverage_text(study.scores, kept)
        out.figures["scatter"] = charts.aggregate_scatter(table)
        folder = paper.paper_files(params, sorted(study.scores["model"].unique()))
        out.figures["paper"] = paper.block(paper.summed_rows(paper.read_json(folder, "robustness_checks.json"), table),
                                           "robustness_checks.json") if folder else None
    else:
        table = pd.DataFrame(columns=list(TABLE_STYLE.columns))
        out.values["summary_text"] = NO_SUMS
        out.figures["scatter"] = None
        out.figures["paper"] = None
    out.add_table("table", table, replace(TABLE_STYLE, empty=""))
    return out
