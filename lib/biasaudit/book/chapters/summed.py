"""Chapter 17: do the results depend on how a continuation's log-probability is aggregated?"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from biasaudit import analyses
from biasaudit.book import charts
from biasaudit.book.report import Report, TableStyle
from biasaudit.data.languages import language_label
from biasaudit.run.params import RunParams
from biasaudit.run.study import Study

TABLE_STYLE = TableStyle(columns={
    "language": "language", "n_items": "items", "n_models": "models", "soft_mean": "soft (mean)",
    "soft_sum": "soft (sum)", "drop_mean": "drop (mean)", "drop_sum": "drop (sum)",
    "reliable_drops_mean": "reliable drops (mean)", "reliable_drops_sum": "reliable drops (sum)",
    "slope_mean": "slope (mean)", "slope_sum": "slope (sum)", "same_binary": "same choice under both",
    "token_gap": "token gap"}, percent=("same_binary",))
NO_SUMS = ("This run's scores carry only per-token mean log-probs (the paper's released scores are of this kind: "
           "summed log-probs and token counts were not released), so the two aggregates cannot be compared here. "
           "Rerun with a run this project scored itself (the default run, or params/sources.yml), whose scores keep "
           "both the sums and the token counts.")


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


def report(params: RunParams) -> Report:
    study = Study.from_params(params)
    out = Report()
    if analyses.has_aggregate(study.scores, "sum"):
        table = study.computed("summed_vs_mean", lambda: analyses.summed_vs_mean(study.scores, study.options))
        out.values["summary_text"] = summary_text(table)
        out.figures["scatter"] = charts.aggregate_scatter(table)
    else:
        table = pd.DataFrame(columns=list(TABLE_STYLE.columns))
        out.values["summary_text"] = NO_SUMS
        out.figures["scatter"] = None
    out.add_table("table", table, replace(TABLE_STYLE, empty=""))
    return out
