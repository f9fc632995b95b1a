"""The release's other inputs, beside the scores: the translation checks and the token counts the
paper's tables rest on, read into tables keyed by this project's version ids.

- `data/validation_results.json`: per translated version (`gp_001_fr`), the back-translation's
  embedding similarity to the English context, the back-translation itself and whether it passed
  the paper's threshold: the release's own faithfulness judgment (the paper's "faithful only" subset).
- `data/contrast_judgment_full.csv`: per translated version, whether its two continuations still
  contrast as in English (`preserved`, `partly`, `lost`): the paper's "fully preserved" subset.
- `results/reanalysis/token_counts.csv`: tokens in each contrasting continuation per model and
  version, so a summed log-prob is the released per-token mean × its token count.

Every reader checks its file's shape and names the file, row and field of what it cannot read.
Version ids follow `data.released`: `<base>/<language>`, `zh-CN` read as `zh`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from biasaudit.data.release_files import ReleasedDataError, read_release_json
from biasaudit.data.released import iso_language


def version_id(prompt_id: str) -> tuple[str, str, str]:
    """(item id, base id, language) of a release prompt id: `ss_1733_zh-CN` -> (`ss_1733/zh`, `ss_1733`, `zh`)."""
    base, _, tag = str(prompt_id).rpartition("_")
    if not base:
        raise ValueError(f"{prompt_id!r} is not a release prompt id (<base>_<language>)")
    language = iso_language(tag)
    return f"{base}/{language}", base, language


def _ids(prompt_ids: pd.Series, path: Path) -> pd.DataFrame:
    rows = []
    for line, prompt_id in enumerate(prompt_ids, 2):
        try:
            rows.append(version_id(prompt_id))
        except ValueError as err:
            raise ReleasedDataError(f"{path}: row {line}, field 'prompt_id': {err}") from None
    return pd.DataFrame(rows, columns=["item_id", "base_id", "language"], index=prompt_ids.index)


def read_validation(path: str | Path) -> pd.DataFrame:
    """validation_results.json as one row per translated version: item_id, base_id, language, prompt_id,
    similarity (back-translation against the English context), passed, back_translated."""
    path = Path(path)
    content = read_release_json(path, dict, "an object of prompt id -> check")
    rows = []
    for prompt_id, check in content.items():
        if not isinstance(check, dict) or not {"similarity", "passed"} <= set(check):
            raise ReleasedDataError(f"{path}: entry {prompt_id!r} lacks 'similarity' or 'passed'")
        similarity = check["similarity"]
        if not isinstance(similarity, (int, float)) or isinstance(similarity, bool) or not 0 <= similarity <= 1.0001:
            raise ReleasedDataError(f"{path}: entry {prompt_id!r}, field 'similarity': {similarity!r} is not a "
                                    "similarity between 0 and 1")
        if not isinstance(check["passed"], bool):
            raise ReleasedDataError(f"{path}: entry {prompt_id!r}, field 'passed': {check['passed']!r} is not true "
                                    "or false")
        rows.append({"prompt_id": prompt_id, "similarity": float(similarity), "passed": check["passed"],
                     "back_translated": str(check.get("back_translated", ""))})
    table = pd.DataFrame(rows, columns=["prompt_id", "similarity", "passed", "back_translated"])
    return pd.concat([_ids(table["prompt_id"], path), table], axis=1)


JUDGMENTS: tuple[str, ...] = ("preserved", "partly", "lost")


def read_contrast_judgments(path: str | Path) -> pd.DataFrame:
    """contrast_judgment_full.csv as one row per translated version: item_id, base_id, language,
    prompt_id, source, judgment (preserved, partly or lost), judge."""
    path = Path(path)
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ReleasedDataError(f"{path}: cannot be read as contrast_judgment_full.csv: {err}") from err
    missing = [c for c in ("prompt_id", "language", "judgment") if c not in table]
    if missing:
        raise ReleasedDataError(f"{path}: missing column(s) {missing}")
    bad = ~table["judgment"].isin(JUDGMENTS)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ReleasedDataError(f"{path}: row {row + 2}, field 'judgment': {table['judgment'].iloc[row]!r} is not one "
                                f"of {list(JUDGMENTS)}")
    ids = _ids(table["prompt_id"], path)
    return pd.concat([ids, table[["prompt_id"]], table.reindex(columns=["source", "judgment", "judge"])], axis=1)


def read_token_counts(path: str | Path) -> pd.DataFrame:
    """token_counts.csv as one row per model × version: model, item_id, base_id, language,
    ntok_stereotyped, ntok_anti_stereotyped (the release has no count for the third option)."""
    path = Path(path)
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ReleasedDataError(f"{path}: cannot be read as token_counts.csv: {err}") from err
    missing = [c for c in ("model", "prompt_id", "n_stereotype", "n_anti_stereotype") if c not in table]
    if missing:
        raise ReleasedDataError(f"{path}: missing column(s) {missing}")
    for column in ("n_stereotype", "n_anti_stereotype"):
        counts = pd.to_numeric(table[column], errors="coerce")
        bad = counts.isna() | (counts < 1) | (counts != counts.round())
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ReleasedDataError(f"{path}: row {row + 2}, field {column!r}: {table[column].iloc[row]!r} is not a "
                                    "token count")
        table[column] = counts.astype(int)
    ids = _ids(table["prompt_id"], path)
    return pd.concat([table[["model"]], ids, table[["n_stereotype", "n_anti_stereotype"]].rename(columns={
        "n_stereotype": "ntok_stereotyped", "n_anti_stereotype": "ntok_anti_stereotyped"})], axis=1)


def with_token_counts(scores: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """Released scores with their summed log-probs made from the token counts: lp_sum = lp_mean × ntok for
    the two contrasting options (the third keeps no sum); versions without a count keep NaN."""
    keyed = counts.set_index(["model", "item_id"])[["ntok_stereotyped", "ntok_anti_stereotyped"]]
    joined = scores[["model", "item_id"]].join(keyed, on=["model", "item_id"])
    out = scores.copy()
    for option in ("stereotyped", "anti_stereotyped"):
        ntok = joined[f"ntok_{option}"].to_numpy(dtype=float)
        out[f"ntok_{option}"] = ntok
        out[f"lp_sum_{option}"] = out[f"lp_mean_{option}"].to_numpy(dtype=float) * ntok
    return out
