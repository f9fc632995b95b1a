"""Item versions made by translation: item by item, field by field, and English round trips.

Context and each continuation are translated separately, so every version keeps the item's
structure, and an item whose two contrasting continuations come out the same is flagged as
collapsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from biasaudit.data.item_table import (
    ITEM_COLUMNS,
    is_collapsed,
    normalise,
    validate_items,
)
from biasaudit.translate.backends import TEXT_FIELDS, TableTranslator, Translator, slug
from biasaudit.translate.cleaning import fit_fragment

FAILED_COLUMNS: list[str] = ["item_id", "base_id", "language", "via", "field", "text", "reason"]


@dataclass
class ItemResult:
    """Item versions a step made, and those it could not make.

    `items` follows the items contract and includes collapsed versions (the pipeline sets them
    aside and counts them, as for any bank); `failed` has one row per version not made, with
    the field and reason of its first failure.
    """

    items: pd.DataFrame
    failed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FAILED_COLUMNS))

    @property
    def collapsed(self) -> pd.DataFrame:
        """Versions whose two contrasting continuations became the same text (NFKC + casefold)."""
        return self.items.loc[is_collapsed(self.items)] if len(self.items) else self.items

    def summary(self) -> pd.DataFrame:
        """Per language and route: versions made, failed, collapsed."""
        made = self.items.assign(collapsed=is_collapsed(self.items) if len(self.items) else False)
        made = made.groupby(["language", "via"]).agg(made=("item_id", "size"), collapsed=("collapsed", "sum"))
        failed = self.failed.groupby(["language", "via"]).size().rename("failed")
        table = made.join(failed, how="outer").fillna(0).astype(int).reset_index()
        return table[["language", "via", "made", "failed", "collapsed"]]


def translate_fields(rows: pd.DataFrame, translator: Translator, target: str, *, fit: bool = True,
                     fit_to: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """Translate the text fields of each row (from the row's own language) into `target`.

    Returns the rows whose every field was translated (index kept) and, for each other row,
    a failure record {index, field, text, reason} of its first failed field. With `fit`, each
    field is fitted (`fit_fragment`) to the same field of `fit_to` (default: the rows), matched
    by index: a round trip fits its English result to the English original.
    """
    if not rows.index.is_unique:
        raise ValueError("rows to translate need a unique index")
    reference = rows if fit_to is None else fit_to
    translated = rows.copy()
    ok = pd.Series(True, index=rows.index)
    failures: list[dict] = []
    for source, group in rows.groupby("language", sort=False):
        flat = [text for name in TEXT_FIELDS for text in group[name]]
        table = translator.translate_detailed(flat, source, target)
        for k, name in enumerate(TEXT_FIELDS):
            results = table["translation"].iloc[k * len(group):(k + 1) * len(group)]
            reasons = table["reason"].iloc[k * len(group):(k + 1) * len(group)]
            for index, text, value, reason in zip(group.index, group[name], results, reasons):
                if value is None:
                    if ok[index]:
                        failures.append({"index": index, "field": name, "text": text, "reason": reason})
                    ok[index] = False
                elif fit and text:
                    translated.at[index, name] = fit_fragment(str(reference.at[index, name]), value, target)
                else:
                    translated.at[index, name] = value
    return translated.loc[ok], failures


def _failure_table(rows: pd.DataFrame, failures: list[dict], item_ids: pd.Series, via: str | pd.Series,
                   language: str) -> pd.DataFrame:
    records = [{"item_id": item_ids[f["index"]], "base_id": rows.at[f["index"], "base_id"], "language": language,
                "via": via if isinstance(via, str) else via[f["index"]], "field": f["field"], "text": f["text"],
                "reason": f["reason"]} for f in failures]
    return pd.DataFrame(records, columns=FAILED_COLUMNS)


def _originals(items: pd.DataFrame) -> pd.DataFrame:
    originals = items.loc[items["variant"] == "original"].reset_index(drop=True)
    if originals.empty:
        raise ValueError("no English originals (variant 'original') in the items to translate")
    return originals


def _result(made: list[pd.DataFrame], failed: list[pd.DataFrame], originals: pd.DataFrame | None = None) -> ItemResult:
    """Collect versions and failures; check the versions against the items contract."""
    made = [m[ITEM_COLUMNS] for m in made if len(m)]
    items = pd.concat(made, ignore_index=True) if made else pd.DataFrame(columns=ITEM_COLUMNS)
    if len(items) and originals is not None:
        validate_items(pd.concat([originals[ITEM_COLUMNS], items], ignore_index=True), origin="made item versions")
    failed = [f for f in failed if len(f)]
    failures = pd.concat(failed, ignore_index=True) if failed else pd.DataFrame(columns=FAILED_COLUMNS)
    return ItemResult(items, failures)


def translate_items(items: pd.DataFrame, translator: Translator, targets: Sequence[str], *,
                    fit_fragments: bool = True) -> ItemResult:
    """Translate the English originals in `items` into each target language, field by field.

    Context and each continuation are translated separately, so every version keeps the
    item's structure; an item whose two contrasting continuations come out the same is kept
    but flagged (`ItemResult.collapsed`). Versions get variant "translation", via the
    translator's name, and item_id "<base_id>/<lang>@<model>" (the bank's human translations
    keep "<base_id>/<lang>"). A `TableTranslator` returns the table's versions as written.
    """
    originals = _originals(items)
    made, failed = [], []
    for target in targets:
        if isinstance(translator, TableTranslator):
            versions = translator.item_versions(originals["base_id"], target)
            missing = originals.loc[~originals["base_id"].isin(versions["base_id"])]
            made.append(versions)
            failed.append(pd.DataFrame({"item_id": missing["base_id"] + f"/{target}", "base_id": missing["base_id"],
                                        "language": target, "via": translator.name, "field": "item", "text": "",
                                        "reason": "no human translation in the table"}, columns=FAILED_COLUMNS))
            continue
        item_ids = originals["base_id"] + f"/{target}@{slug(translator.name)}"
        translated, failures = translate_fields(originals, translator, target, fit=fit_fragments)
        made.append(translated.assign(language=target, variant="translation", via=translator.name,
                                      item_id=item_ids.loc[translated.index]))
        failed.append(_failure_table(originals, failures, item_ids, translator.name, target))
    return _result(made, failed, originals)


@dataclass
class RoundTrip(ItemResult):
    """English rewordings made by translating to a pivot language and back.

    `unchanged` gives, per pivot, the share of text fields (context and the three options) and
    of whole items that came back exactly as they went in (NFKC + casefold): a round trip that
    changes nothing is no rewording. `pivots` holds the pivot-language texts.
    """

    unchanged: pd.DataFrame = field(default_factory=pd.DataFrame)
    pivots: pd.DataFrame = field(default_factory=pd.DataFrame)


def round_trip(items: pd.DataFrame, translator: Translator, pivots: Sequence[str] = ("de", "fi", "ja"), *,
               back_translator: Translator | None = None, fit_fragments: bool = True) -> RoundTrip:
    """Reword the English originals by a round trip through each pivot language.

    Versions get variant "rewording", language "en", via the pivot and item_id
    "<base_id>/en~<pivot>" (docs/design.md, "Version ids"). `back_translator` defaults to `translator`.
    """
    originals = _originals(items)
    back = back_translator or translator
    made, failed, unchanged, middles = [], [], [], []
    for pivot in pivots:
        item_ids = originals["base_id"] + f"/en~{pivot}"
        forward, failures = translate_fields(originals, translator, pivot, fit=fit_fragments)
        forward = forward.assign(language=pivot)
        returned, back_failures = translate_fields(forward, back, "en", fit=fit_fragments, fit_to=originals)
        returned = returned.assign(language="en", variant="rewording", via=pivot, item_id=item_ids.loc[returned.index])
        middles.append(forward.assign(via=translator.name))
        made.append(returned)
        failed.append(_failure_table(originals, failures + back_failures, item_ids, pivot, "en"))
        unchanged.append(unchanged_share(originals, returned).assign(pivot=pivot))
    result = _result(made, failed, originals)
    shares = pd.concat(unchanged, ignore_index=True)[["pivot", "items", "share_fields_unchanged",
                                                      "share_items_unchanged"]] if unchanged else pd.DataFrame()
    return RoundTrip(result.items, result.failed, unchanged=shares,
                     pivots=pd.concat(middles, ignore_index=True) if middles else pd.DataFrame())


def unchanged_share(originals: pd.DataFrame, versions: pd.DataFrame,
                    fields: Sequence[str] = TEXT_FIELDS) -> pd.DataFrame:
    """Share of text fields, and of whole items, identical (NFKC + casefold) to the original."""
    pairs = versions.merge(originals, on="base_id", suffixes=("", "_original"))
    if pairs.empty:
        return pd.DataFrame({"items": [0], "share_fields_unchanged": [float("nan")],
                             "share_items_unchanged": [float("nan")]})
    same = pd.DataFrame({f: [normalise(a) == normalise(b) for a, b in zip(pairs[f], pairs[f + "_original"])]
                         for f in fields})
    return pd.DataFrame({"items": [len(pairs)], "share_fields_unchanged": [float(same.to_numpy().mean())],
                         "share_items_unchanged": [float(same.all(axis=1).mean())]})


