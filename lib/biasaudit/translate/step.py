"""Chapter 01's step: judge the bank's human translations, translate a sample by machine, round trips.

Its tables go to runs/<run>/steps/translate/ (`run.steps`); the versions other chapters read are
also written at the run's top: `similarity.parquet` (the human versions' similarity, chapter 16; not
on a run of the released scores, which keeps the release's own),
`machine_translations.parquet` (chapter 31 scores them) and `round_trip_rewordings.parquet`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasaudit.core.paths import project_path, run_dir
from biasaudit.core.store import write_atomically
from biasaudit.data.item_table import read_items
from biasaudit.data.release_items import paper_bank
from biasaudit.run.engine import RayOptions
from biasaudit.run.params import PAPER_BANK, RunParams
from biasaudit.run.steps import StepTables, write_step
from biasaudit.translate import judge
from biasaudit.translate.backends import make_translator
from biasaudit.translate.versions import round_trip, translate_items


def bank(params: RunParams) -> pd.DataFrame:
    """The item banks' versions as they are (the paper's bank: its sample, from where `released_scores` says)."""
    return pd.concat([paper_bank(params.released_scores, data_dir=params.data_dir, sample=params.paper_sample,
                                 seed=params.seed)[0] if path == PAPER_BANK else read_items(project_path(path))
                      for path in params.item_banks], ignore_index=True)


def sample_originals(originals: pd.DataFrame, n_items: int, seed: int) -> pd.DataFrame:
    """`n_items` English originals drawn with the run's seed (0: all)."""
    ids = originals["base_id"].to_numpy()
    chosen = ids if n_items == 0 else np.random.default_rng(seed).choice(ids, size=min(n_items, len(ids)),
                                                                         replace=False)
    return originals.loc[originals["base_id"].isin(chosen)]


def run_translation(params: RunParams) -> StepTables:
    """Embed and judge, translate and judge again; write every table (`run.steps`)."""
    items = bank(params)
    originals = items.loc[items["variant"] == "original"]
    human = items.loc[(items["variant"] == "translation") & items["language"].isin(params.languages)]
    english_rewordings = items.loc[(items["variant"] == "rewording") & (items["language"] == "en")]
    embed = judge.load_embedder(params.embedder)
    judged = pd.concat([human, english_rewordings], ignore_index=True)
    similarity = judge.similarity_table(items, judged, embed, threshold=params.faithful_threshold)
    unrelated = judge.unrelated_similarity(items, judged, embed, seed=params.seed)
    similarity = judge.calibrate(similarity, unrelated)
    # A run of the paper's released scores keeps the release's own similarity table (written when its scores
    # were imported): the bank's versions judged here are not the run's items.
    if not params.released_scores:
        write_atomically(similarity, run_dir(params.run_name) / "similarity.parquet")

    sample = sample_originals(originals, params.n_sample_items, params.seed)
    targets = list(params.sample_languages) or list(params.languages)
    machine = make_translator(params.translator, kind=params.translator_kind, items=items,
                              batch_size=params.batch_size, device=params.device_or_none,
                              dtype=params.generation_dtype, progress=False, executor=RayOptions.from_params(params))
    made = translate_items(sample, machine, targets)
    write_atomically(made.items, run_dir(params.run_name) / "machine_translations.parquet")
    back = judge.back_translate(made.items, machine)[0] if params.back_translate else None
    machine_similarity = judge.similarity_table(items, made.items, embed, threshold=params.faithful_threshold,
                                                back_translations=back)
    floor = unrelated if back is None else pd.concat(
        [unrelated, judge.unrelated_similarity(items, made.items, embed, seed=params.seed, back_translations=back)])
    machine_similarity = judge.calibrate(machine_similarity, floor)
    same_items = human.loc[human["base_id"].isin(sample["base_id"]) & human["language"].isin(targets)]
    references, _ = judge.reference_metrics(made.items, same_items)
    tables = {"similarity": similarity, "unrelated": unrelated, "machine": made.items, "failed": made.failed,
              "machine_summary": made.summary(), "machine_similarity": machine_similarity,
              "references": references}
    if params.pivots:
        trips = round_trip(originals, machine, list(params.pivots))
        write_atomically(trips.items, run_dir(params.run_name) / "round_trip_rewordings.parquet")
        tables["trip_similarity"] = judge.calibrate(judge.similarity_table(
            items, trips.items, embed, threshold=params.faithful_threshold), unrelated)
        tables["trips_unchanged"] = trips.unchanged
        tables["trips"] = trips.items
    made_tables = StepTables(tables, {"embedder": embed.name})
    write_step(params, "translate", made_tables)
    return made_tables
