"""The paper's release written as a run, so that every chapter reads it like a run it scored itself.

Beside the scores (`data.released`), what the release holds that the paper's tables rest on goes into
the run too, where the folder has it (`data.release_inputs`):

- the summed log-probs of the contrasting continuations, from token_counts.csv (mean × tokens), so
  chapter 17's summed analysis runs on the released translations and English originals (the
  rewordings have no counts: their sums stay empty);
- `similarity.parquet` from validation_results.json (the release's own back-translation check),
  which chapters 16 and 22 read as their similarity table, with the paper's threshold 0.9;
- `contrast_judgments.parquet` from contrast_judgment_full.csv (preserved, partly, lost);
- `llm_rewordings.parquet`: the LLM rewordings of English items, the paper's Table 3 comparison,
  kept out of the scores (never a route of the noise floor);
- the English rewordings' own texts from noise_floor_paraphrases.json (the score files give each the
  original's prompt id, so without that file a rewording shows its original's texts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import pandas as pd

from biasaudit.core.paths import project_path, run_dir
from biasaudit.core.store import ScoreStore, run_lock, write_atomically
from biasaudit.data.item_table import ITEM_COLUMNS
from biasaudit.data.release_files import ReleasedDataError, release_file, resolve_released_source
from biasaudit.data.release_inputs import (
    read_contrast_judgments,
    read_token_counts,
    read_validation,
    with_token_counts,
)
from biasaudit.data.release_items import read_paper_rewordings
from biasaudit.data.released import (
    NOISE_FILE_COLUMNS,
    SCORE_COLUMNS,
    apply_label_fix,
    as_scores,
    category_lookup,
    find_release_files,
    load_released,
    noise_base_ids,
    read_label_fix,
    read_release_csv,
)

# What the release's own similarity is: the back-translation of each translated context, embedded and set
# against the English context (the paper's validation step).
RELEASED_SIMILARITY = "back-translation (the release's own check)"
JUDGMENTS_FILE = "contrast_judgments.parquet"
LLM_FILE = "llm_rewordings.parquet"


TEXTS: list[str] = ["context", "stereotyped", "anti_stereotyped", "third"]


def with_rewording_texts(scores: pd.DataFrame, paraphrases: Path, label_fix: Path) -> pd.DataFrame:
    """The released scores with each English rewording's own texts (noise_floor_paraphrases.json): the score
    files name a rewording by its English original's prompt id, so without the file it shows the original's."""
    originals = scores.loc[scores["variant"] == "original"].drop_duplicates("item_id")
    texts = read_paper_rewordings(paraphrases, originals, read_label_fix(label_fix)).set_index("item_id")[TEXTS]
    known = scores["item_id"].isin(texts.index)
    scores = scores.copy()
    scores.loc[known, TEXTS] = texts.loc[scores.loc[known, "item_id"], TEXTS].to_numpy()
    return scores


def import_released(
    run_name: str,
    source: str | Path,
    *,
    models: Iterable[str] | None = None,
    fix_labels: bool = True,
    layer_b: bool = False,
    keep_models: Iterable[str] = (),
) -> pd.DataFrame:
    """Write the released scores as run `run_name` and return the scores table.

    `source` is "download" (fetch from GitHub at the pinned commits into the cache, sha256
    verified; offline this fails saying what to download and where) or a local folder. Writes
    runs/<run>/items.parquet, the scores (replacing any there), collapsed.parquet (versions
    set aside as collapsed contrasts), released.json (what was read and what was flagged) and, where the
    folder holds their files, the tables of the module docstring. The stored scores of `keep_models` (new
    models scored beside the paper's ten, `run.pipeline.prepare_run`) are kept.
    """
    chosen = None if models is None else list(models)
    folder = resolve_released_source(source, chosen)
    released = load_released(folder, fix_labels=fix_labels, layer_b=layer_b, models=chosen)
    out = run_dir(run_name)
    scores = released.scores
    paraphrases = release_file(folder, "noise_floor_paraphrases.json")
    if paraphrases is not None and fix_labels:
        scores = with_rewording_texts(scores, paraphrases, release_file(folder, "label_fix.json"))
    counts_path = release_file(folder, "token_counts.csv")
    if counts_path is not None:
        scores = with_token_counts(scores, read_token_counts(counts_path))
    items = scores[ITEM_COLUMNS].drop_duplicates("item_id").reset_index(drop=True)
    collapsed = released.collapsed[ITEM_COLUMNS].drop_duplicates("item_id").reset_index(drop=True)
    table = scores[["model", *ITEM_COLUMNS, *SCORE_COLUMNS]].assign(scorer_boundary=False)
    validation_path = release_file(folder, "validation_results.json")
    judgments_path = release_file(folder, "contrast_judgment_full.csv")
    llm = read_llm_rewordings(folder, models=chosen, fix_labels=fix_labels)
    report = {**released.summary, "source": str(folder), "fix_labels": fix_labels, "layer_b": layer_b,
              "token_counts": str(counts_path) if counts_path else None,
              "validation_results": str(validation_path) if validation_path else None,
              "contrast_judgments": str(judgments_path) if judgments_path else None,
              "llm_rewordings": int(len(llm)),
              "score_mismatch_rows": released.score_mismatches.head(50).to_dict("records"),
              "english_mismatch_rows": released.english_mismatches.head(50).to_dict("records")}
    with run_lock(out):
        for name in ("similarity.parquet", JUDGMENTS_FILE, LLM_FILE):  # nothing left from another release
            (out / name).unlink(missing_ok=True)
        write_atomically(items, out / "items.parquet")
        write_atomically(collapsed, out / "collapsed.parquet")
        store = ScoreStore(out)
        store.clear(keep_models=list(keep_models))
        store.append(table)
        if validation_path is not None:
            similarity = read_validation(validation_path)
            similarity = similarity.loc[similarity["item_id"].isin(items["item_id"])]
            write_atomically(similarity[["item_id", "similarity", "passed"]].assign(kind=RELEASED_SIMILARITY),
                             out / "similarity.parquet")
        if judgments_path is not None:
            write_atomically(read_contrast_judgments(judgments_path), out / JUDGMENTS_FILE)
        if len(llm):
            write_atomically(llm[["model", *ITEM_COLUMNS, *SCORE_COLUMNS]], out / LLM_FILE)
        (out / "released.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    return table


def read_llm_rewordings(folder: str | Path, *, models: Iterable[str] | None = None,
                        fix_labels: bool = True) -> pd.DataFrame:
    """The release's English items reworded by an LLM (`<model>_noise_floor_llm.csv`: pivot `llm`, seed 3)
    as rows of the scores table (variant `rewording`, via `llm`, item id `<base>/en~llm-s<seed>`), labels
    fixed and collapsed pairs set aside; empty where the folder has none. The paper reads them apart from
    the round trips (its Table 3's LLM row): never a route of the noise floor."""
    folder = project_path(folder)
    folder = folder if folder.is_dir() else folder.parent
    roots = [folder, folder / "noise_floor", folder / "results" / "v2" / "noise_floor",
             folder / "MultilingualBiasAudit" / "results" / "v2" / "noise_floor"]
    files = sorted({p for root in roots for p in root.glob("*_noise_floor_llm.csv")})
    if models is not None:
        files = [p for p in files if p.name.split("_noise_floor")[0] in set(models)]
    if not files:
        return pd.DataFrame(columns=["model", *ITEM_COLUMNS, *SCORE_COLUMNS])
    raw = pd.concat([read_release_csv(p, NOISE_FILE_COLUMNS) for p in files], ignore_index=True)
    base = noise_base_ids(raw["prompt_id"])
    if fix_labels:
        _, _, fix_path, _ = find_release_files(folder, None)
        if fix_path is None:
            raise ReleasedDataError(f"{folder}: the LLM rewordings need label_fix.json beside them")
        raw, _ = apply_label_fix(raw, read_label_fix(fix_path), base)
        base = noise_base_ids(raw["prompt_id"])
    raw = raw.assign(category=category_lookup(raw, base, pd.DataFrame(columns=["base_prompt_id", "category"])),
                     context=None)
    seed = pd.to_numeric(raw["seed"], errors="coerce").fillna(-1).astype(int).astype(str)
    pivot = raw["pivot"].astype(str)
    rows = as_scores(raw, language=pd.Series("en", index=raw.index), variant=pd.Series("rewording", index=raw.index),
                      via=pivot, item_id=base + "/en~" + pivot + "-s" + seed, base=base).drop(columns="prompt_id")
    collapsed = rows["lp_mean_stereotyped"].to_numpy() == rows["lp_mean_anti_stereotyped"].to_numpy()
    return rows.loc[~collapsed].reset_index(drop=True)
