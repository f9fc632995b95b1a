"""The items contract's columns (docs/design.md, "Data contracts"): the one list the loaders
(`biasaudit.data.item_table`) write and the score store (`biasaudit.core.store`) keeps beside each score."""

from __future__ import annotations

ITEM_COLUMNS: list[str] = [
    "item_id",
    "base_id",
    "source",
    "dimension",
    "category",
    "language",
    "variant",
    "via",
    "context",
    "stereotyped",
    "anti_stereotyped",
    "third",
    "third_kind",
]
# the three continuations of an item, in this order everywhere
OPTIONS: tuple[str, str, str] = ("stereotyped", "anti_stereotyped", "third")
