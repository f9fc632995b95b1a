"""The paper's own items as an item bank (`item_banks: [paper]`): any model can be scored on them.

The release holds the texts behind its scores: `data/prompts.json` (one record per item version: `id`,
`base_id`, `language`, `category`, `layer`, `source`, `context`, `stereotype`, `anti_stereotype`,
`unrelated`, and the English originals) and `data/noise_floor_paraphrases.json` (the English
rewordings behind the noise floors: seed → `<base>_en` → pivot and the four texts). Read here into the
items contract with the version ids of the released score files (`<base>/<language>`,
`<base>/en~<pivot>-s<seed>`), so that a model scored on them stands beside the paper's ten:

- the release's label fix applies to the texts as to the scores (StereoSet's and most of BBQ's
  stored columns are the roles in another order; 25 BBQ items cannot be recovered and are left out);
- the native probes of layer B, which have no English original, are left out, as from the scores;
- a version whose two contrasting continuations are the same text is set aside, by the paper's own
  rule (NFKC, case folded, punctuation and spaces dropped: its 37 translations and 20 rewordings).

The paper joins every context and continuation with a space, Chinese included; this project joins
Chinese without one (`item_table.join_text`), so a Chinese log-prob need not equal the release's.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd

from biasaudit.core.paths import project_path
from biasaudit.data.item_table import ITEM_COLUMNS, validate_items
from biasaudit.data.public import DATA_DIR_VARIABLE
from biasaudit.data.release_files import (
    ReleasedDataError,
    fetch_paper_items,
    read_release_json,
    release_file,
    released_cache,
)
from biasaudit.data.released import iso_language, read_label_fix, source_dimension_category

ROLES: tuple[tuple[str, str], ...] = (("stereotype", "stereotyped"), ("anti_stereotype", "anti_stereotyped"),
                                      ("unrelated", "third"))


def paper_form(text: str) -> str:
    """The form in which the paper counts two continuations as one: NFKC, case folded, without punctuation
    or spaces (letters and combining marks kept, so vowel signs still tell two words apart)."""
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    return "".join(c for c in folded if unicodedata.category(c)[0] not in ("P", "Z") and not c.isspace())


def _roles(record: dict, mapping: dict | None, where: str) -> dict[str, str]:
    """The three texts of a record under this project's option names, with the label fix applied."""
    out = {}
    for role, option in ROLES:
        stored = (mapping or {}).get(role, role)
        value = record.get(stored)
        if not isinstance(value, str):
            raise ReleasedDataError(f"{where}: field {stored!r} is missing or not text")
        out[option] = value.strip()
    return out


def read_paper_prompts(path: str | Path, label_fix: dict) -> pd.DataFrame:
    """prompts.json as item versions (layer A, label fix applied): the items contract's columns."""
    path = Path(path)
    records = read_release_json(path, list, "a list of item versions")
    rows = []
    for number, record in enumerate(records):
        where = f"{path}: record {number} ({record.get('id', '?')!r})"
        missing = [k for k in ("id", "base_id", "language", "category", "layer", "context") if k not in record]
        if missing:
            raise ReleasedDataError(f"{where}: missing field(s) {missing}")
        base = str(record["base_id"])
        if record["layer"] != "A" or (base in label_fix and label_fix[base] is None):
            continue
        try:
            language = iso_language(record["language"])
        except ValueError as err:
            raise ReleasedDataError(f"{where}, field 'language': {err}") from None
        source, dimension, category = source_dimension_category(str(record["category"]))
        rows.append({"item_id": f"{base}/{language}", "base_id": base, "source": source, "dimension": dimension,
                     "category": category, "language": language,
                     "variant": "original" if language == "en" else "translation",
                     "via": "human" if language == "en" else "released", "context": str(record["context"]).strip(),
                     **_roles(record, label_fix.get(base), where),
                     "third_kind": "unknown" if source == "bbq" else "unrelated"})
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


def read_paper_rewordings(path: str | Path, originals: pd.DataFrame, label_fix: dict) -> pd.DataFrame:
    """noise_floor_paraphrases.json as English rewordings of the bank's originals (label fix applied; an
    original the bank does not keep keeps no rewording)."""
    path = Path(path)
    seeds = read_release_json(path, dict, "an object of seed -> rewordings")
    known = originals.set_index("base_id")
    rows = []
    for seed, variants in seeds.items():
        for prompt_id, version in variants.items():
            base = str(prompt_id).removesuffix("_en")
            if base not in known.index:
                continue
            where = f"{path}: seed {seed}, {prompt_id!r}"
            pivot = version.get("pivot")
            if not isinstance(pivot, str) or not isinstance(version.get("context"), str):
                raise ReleasedDataError(f"{where}: missing 'pivot' or 'context'")
            english = known.loc[base]
            rows.append({"item_id": f"{base}/en~{pivot}-s{seed}", "base_id": base, "source": english["source"],
                         "dimension": english["dimension"], "category": english["category"], "language": "en",
                         "variant": "rewording", "via": pivot, "context": version["context"].strip(),
                         **_roles(version, label_fix.get(base), where), "third_kind": english["third_kind"]})
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


# The fields the paper's Table 3 compares with their originals (its columns "Sim." and "Same"), as its files
# name them. (The similarity is computed in chapter 11: `book.chapters.noise_floor.similarity_by_route`.)
SAME_FIELDS: tuple[str, ...] = ("context", "stereotype", "anti_stereotype")


def rewording_fields(prompts: str | Path, paraphrases: str | Path, label_fix: str | Path) -> pd.DataFrame:
    """Every field the paper's Table 3 sets beside its original: per rewording of an English layer-A prompt, its
    context, stereotype and anti-stereotype, each option under the role the label fix gives it, and the
    original's text of that field. As in the paper, the items the label fix drops are left out (their
    rewordings with them: 362 items per route). Columns: pivot, prompt_id, field, original, reworded."""
    prompts, paraphrases = Path(prompts), Path(paraphrases)
    mapping = read_label_fix(Path(label_fix))
    english = {str(r.get("id")): r for r in read_release_json(prompts, list, "a list of item versions")
               if r.get("language") == "en" and r.get("layer") == "A"}
    rows = []
    for seed, variants in read_release_json(paraphrases, dict, "an object of seed -> rewordings").items():
        for prompt_id, version in variants.items():
            original = english.get(str(prompt_id))
            base = str(original.get("base_id") or "") if original is not None else ""
            if original is None or (base in mapping and mapping[base] is None):
                continue
            roles = mapping.get(base) or {}
            for field in SAME_FIELDS:
                stored = roles.get(field, field)
                if not isinstance(version.get(stored), str) or not isinstance(original.get(stored), str):
                    raise ReleasedDataError(f"{paraphrases}: seed {seed}, {prompt_id!r}, field {stored!r}: no text "
                                            "here or in prompts.json")
                rows.append({"pivot": version.get("pivot"), "prompt_id": str(prompt_id), "field": field,
                             "original": original[stored], "reworded": version[stored]})
    return pd.DataFrame(rows, columns=["pivot", "prompt_id", "field", "original", "reworded"])


def rewording_sameness(fields: pd.DataFrame) -> pd.DataFrame:
    """The paper's "Same" of Table 3: per route, the share of the fields of `rewording_fields` returned unchanged
    (texts compared as stored, spaces at the ends stripped; no other normalisation). (The book's own count,
    `analyses.unchanged_fields`, also counts the third option and compares normalised texts.) Columns: pivot,
    n_fields, share_unchanged."""
    unchanged = fields.assign(unchanged=fields["original"].str.strip() == fields["reworded"].str.strip())
    return unchanged.groupby("pivot", as_index=False).agg(n_fields=("unchanged", "size"),
                                                          share_unchanged=("unchanged", "mean"))


def paper_items(prompts: str | Path, label_fix: str | Path, rewordings: str | Path | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(items, collapsed): the paper's item versions, with its English rewordings where their file is given,
    and the versions set aside because their two contrasting continuations became one text."""
    mapping = read_label_fix(Path(label_fix))
    items = read_paper_prompts(prompts, mapping)
    if rewordings is not None:
        items = pd.concat([items, read_paper_rewordings(rewordings, items.loc[items["variant"] == "original"],
                                                        mapping)], ignore_index=True)
    same = pd.Series([paper_form(s) == paper_form(a) for s, a in zip(items["stereotyped"], items["anti_stereotyped"])],
                     index=items.index) & (items["variant"] != "original")
    collapsed, kept = items.loc[same].reset_index(drop=True), items.loc[~same].reset_index(drop=True)
    validate_items(kept, origin=str(prompts))
    return kept, collapsed


def paper_bank_folder(source: str | Path = "", data_dir: str = "") -> Path:
    """The folder the paper's items are read from. A folder `source` (the params' `released_scores`) is used
    as it is; otherwise the first that holds prompts.json and label_fix.json of: the download cache,
    `data_dir`/released, $BIASAUDIT_DATA_DIR/released; else they are downloaded into the cache (offline,
    a ReleasedDataError says what to fetch and where)."""
    if source and str(source) != "download":
        folder = project_path(source)
        if release_file(folder, "prompts.json") is None or release_file(folder, "label_fix.json") is None:
            raise ReleasedDataError(f"{folder}: the paper's item bank needs prompts.json and label_fix.json there "
                                    "(noise_floor_paraphrases.json too, for the English rewordings)")
        return folder
    candidates = [released_cache()]
    for root in (data_dir, os.environ.get(DATA_DIR_VARIABLE, "")):
        if root:
            candidates.append(project_path(root) / "released")
    for folder in candidates:
        if release_file(folder, "prompts.json") and release_file(folder, "label_fix.json"):
            return folder
    return fetch_paper_items()


def sample_bases(items: pd.DataFrame, n: int, seed: int) -> list[str]:
    """`n` base items drawn with `seed`, in proportion to the categories (each category's draw spread
    evenly through the sample, so a small sample still touches every category it can); 0 or more than
    there are: all of them."""
    bases = items.drop_duplicates("base_id")[["base_id", "category"]].sort_values("base_id").reset_index(drop=True)
    if n <= 0 or n >= len(bases):
        return bases["base_id"].tolist()
    shuffled = bases.iloc[np.random.default_rng(seed).permutation(len(bases))].reset_index(drop=True)
    rank = shuffled.groupby("category").cumcount()
    size = shuffled.groupby("category")["base_id"].transform("size")
    position = (rank + 0.5) / size  # where in its category's share each base falls
    chosen = shuffled.assign(position=position).sort_values(["position", "base_id"]).head(n)
    return sorted(chosen["base_id"])


def paper_bank(source: str | Path = "", *, data_dir: str = "", sample: int = 0, seed: int = 0
               ) -> tuple[pd.DataFrame, pd.DataFrame, Path]:
    """(items, collapsed, folder): the paper's item bank (`paper_items`) read from `paper_bank_folder`,
    its rewordings where their file is there, and `sample` of its bases (`sample_bases`; 0: all)."""
    folder = paper_bank_folder(source, data_dir)
    rewordings = release_file(folder, "noise_floor_paraphrases.json")
    items, collapsed = paper_items(release_file(folder, "prompts.json"), release_file(folder, "label_fix.json"),
                                   rewordings)
    kept = sample_bases(items, sample, seed)
    return (items.loc[items["base_id"].isin(kept)].reset_index(drop=True),
            collapsed.loc[collapsed["base_id"].isin(kept)].reset_index(drop=True), folder)
