"""How far a model scored here is from the release's scores of the same model, on the same item versions.

Scoring one of the paper's ten models again on the paper's items (`data.release_items.paper_bank`) checks
the release itself: the per-token mean log-probs should agree up to the precision each side computed in
(the release's summary.json reports a 4-bit rerun, `variance_decomposition.rerun_4bit`: its models ran
quantized, so a run here in bf16 or fp32 need not match to the last digit), and the preference between the
two contrasting continuations should agree nearly everywhere. Chinese is joined without a space here and
with one in the paper, so its log-probs may differ more.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OPTIONS: tuple[str, ...] = ("stereotyped", "anti_stereotyped", "third")
AGREEMENT_COLUMNS: list[str] = ["language", "versions", "max_abs_diff", "median_abs_diff", "preference_agrees"]


def release_agreement(scored: pd.DataFrame, released: pd.DataFrame) -> pd.DataFrame:
    """Per language (and "all"): the item versions both tables score, the largest and the median absolute
    difference of the per-token mean log-probs over the three continuations, and the share of versions
    whose preference (stereotyped above anti-stereotyped, or not) is the same. One model per table."""
    for name, table in (("scored", scored), ("released", released)):
        if table["model"].nunique() > 1:
            raise ValueError(f"the {name} table holds {table['model'].nunique()} models; compare one with one")
    columns = [f"lp_mean_{o}" for o in OPTIONS]
    both = scored[["item_id", "language", *columns]].merge(released[["item_id", *columns]], on="item_id",
                                                           suffixes=("_here", "_released"))
    if both.empty:
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    here = both[[f"{c}_here" for c in columns]].to_numpy(float)
    there = both[[f"{c}_released" for c in columns]].to_numpy(float)
    differences = np.abs(here - there)
    prefers_here = here[:, 0] > here[:, 1]
    prefers_there = there[:, 0] > there[:, 1]
    both = both.assign(largest=np.nanmax(differences, axis=1), agrees=prefers_here == prefers_there)
    rows = []
    for language, group in [*both.groupby("language", sort=True), ("all", both)]:
        flat = differences[group.index.to_numpy()].ravel()
        rows.append({"language": language, "versions": len(group), "max_abs_diff": float(np.nanmax(flat)),
                     "median_abs_diff": float(np.nanmedian(flat)), "preference_agrees": float(group["agrees"].mean())})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
