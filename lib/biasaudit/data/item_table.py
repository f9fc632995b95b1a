"""The items table: one row per item version (an English original, a translation or a rewording).

Every source (the project's written bank, StereoSet, BBQ) ends up in this one tidy shape, so
scoring and every analysis work the same on all of them. The columns are fixed in docs/design.md, "Data contracts".
"""

from __future__ import annotations

import io
import unicodedata
from difflib import SequenceMatcher
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    field_validator,
    model_validator,
)

from biasaudit.core.words import counted, plural
from biasaudit.core.columns import ITEM_COLUMNS, OPTIONS
from biasaudit.core.paths import PROJECT_ROOT


# Languages whose script writes no space between words: a continuation is joined to its
# context without a separator there.
NO_SPACE_LANGUAGES: frozenset[str] = frozenset({"zh", "ja", "th"})

DEFAULT_BANK: Path = PROJECT_ROOT / "data" / "items" / "written.csv"


TRIM_MESSAGE = ("starts or ends with whitespace; the scorer joins context and continuation itself (with one space "
                "where the script uses spaces), so a leading space would be read as a double space")


class ItemError(ValueError):
    """A bad item table: the message names the file, row and field."""


class Item(BaseModel):
    """One row of the items table, checked field by field."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    item_id: str
    base_id: str
    source: Literal["stereoset", "bbq", "written"]
    dimension: str
    category: str
    language: str
    variant: Literal["original", "translation", "rewording"]
    via: str
    context: str
    stereotyped: str
    anti_stereotyped: str
    third: str
    third_kind: Literal["unrelated", "unknown"]

    @field_validator("item_id", "base_id", "dimension", "category", "via", "stereotyped",
                     "anti_stereotyped", "third")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty")
        if value != value.strip():
            raise ValueError(TRIM_MESSAGE)
        return value

    @field_validator("context")
    @classmethod
    def _context_trimmed(cls, value: str) -> str:
        # An empty context is allowed (StereoSet items whose blank opens the sentence).
        if value != value.strip():
            raise ValueError(TRIM_MESSAGE)
        return value

    @field_validator("language")
    @classmethod
    def _iso_639_1(cls, value: str) -> str:
        if len(value) != 2 or not value.isascii() or not value.islower():
            raise ValueError(f"{value!r} is not a two-letter ISO 639-1 code")
        return value

    @model_validator(mode="after")
    def _variant_matches_language(self) -> "Item":
        if self.variant == "original" and self.language != "en":
            raise ValueError("variant 'original' must be English (language 'en')")
        if self.variant == "translation" and self.language == "en":
            raise ValueError("variant 'translation' cannot be English")
        return self


def normalise(text: str) -> str:
    """Unicode NFKC plus casefold: the form in which two continuations count as the same."""
    return unicodedata.normalize("NFKC", text).casefold().strip()


def is_collapsed(items: pd.DataFrame) -> pd.Series:
    """True where the two contrasting continuations became the same text (no contrast left)."""
    return pd.Series(
        [normalise(s) == normalise(a) for s, a in zip(items["stereotyped"], items["anti_stereotyped"])],
        index=items.index,
        dtype=bool,
    )


def join_text(context: str, continuation: str, language: str) -> str:
    """The full sentence a model reads: context, a separator where the script uses spaces, continuation."""
    if not context:
        return continuation
    separator = "" if language in NO_SPACE_LANGUAGES else " "
    return context + separator + continuation


def validate_items(items: pd.DataFrame, *, origin: str = "<table>", first_row: int = 2,
                   require_originals: bool = True) -> pd.DataFrame:
    """Check every row against the items contract; raise one ItemError listing every problem.

    `origin` and `first_row` only shape the messages (for a CSV, row 2 is the first data row).
    A table with any bad row is rejected whole: a bank never half-loads. `require_originals`:
    every base item has its English original row (a bank must; a subset being scored need not).
    """
    missing = [c for c in ITEM_COLUMNS if c not in items.columns]
    if missing:
        raise ItemError(f"{origin}: missing {plural(len(missing), 'column')} {missing}; expected {ITEM_COLUMNS}")
    problems: list[str] = []
    records = items[ITEM_COLUMNS].to_dict(orient="records")
    for offset, record in enumerate(records):
        row = first_row + offset
        clean = {k: ("" if v is None or (isinstance(v, float) and pd.isna(v)) else v) for k, v in record.items()}
        try:
            Item(**clean)
        except ValidationError as err:
            for e in err.errors():
                field = ".".join(str(p) for p in e["loc"]) or "row"
                named = f" ({clean['item_id']})" if clean.get("item_id") else ""
                problems.append(f"{origin}: row {row}{named}, field {field!r}: {e['msg'].removeprefix('Value error, ')}")
    duplicated = items["item_id"].duplicated(keep="first")
    for offset in duplicated[duplicated].index:
        pos = items.index.get_loc(offset)
        problems.append(f"{origin}: row {first_row + pos}, field 'item_id': duplicate id {items['item_id'].iloc[pos]!r}")
    originals = set(items.loc[items["variant"] == "original", "base_id"])
    orphans = items.loc[~items["base_id"].isin(originals)] if require_originals else items.iloc[:0]
    for pos in [items.index.get_loc(i) for i in orphans.index]:
        problems.append(
            f"{origin}: row {first_row + pos}, field 'base_id': {items['base_id'].iloc[pos]!r} has no English original row"
        )
    if problems:
        shown = "\n  ".join(problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        raise ItemError(f"{counted(len(problems), 'problem')} in the item table:\n  {shown}{more}")
    return items[ITEM_COLUMNS].reset_index(drop=True)


def read_csv_text(path: Path, error: type[ValueError] = ItemError, **options) -> pd.DataFrame:
    """A CSV file as a table of strings, or `error` naming the file and line: text that is not
    UTF-8, and quoting that breaks the rows. A byte-order mark and CRLF line ends are accepted."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise error(f"{path}: line {line}: not UTF-8 text (byte {data[err.start]:#04x}); save the file as "
                    "UTF-8") from None
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, **options)
    except pd.errors.ParserError as err:
        raise error(f"{path}: the CSV does not parse ({err}); check the quotes on that line "
                    "(a field with a comma or a quote must be quoted, and a quote inside it doubled)") from None


def read_items(path: str | Path = DEFAULT_BANK) -> pd.DataFrame:
    """Read and validate an item table from CSV (UTF-8, one row per item version, the columns of
    the items contract and no others)."""
    path = Path(path)
    if not path.exists():
        raise ItemError(f"{path}: no such item file")
    table = read_csv_text(path)
    for column in table.columns:
        broken = table.index[table[column].str.contains("[\r\n]", regex=True)]
        if len(broken):
            raise ItemError(f"{path}: row {int(broken[0]) + 2}, field {column!r} holds a line break: a quote opened "
                            "there is probably never closed (a field with a comma or a quote must be quoted, and "
                            "a quote inside it doubled)")
    extra = [c for c in table.columns if c not in ITEM_COLUMNS]
    if extra:
        raise ItemError(f"{path}: unknown {plural(len(extra), 'column')} {extra}; an item file has exactly {ITEM_COLUMNS}")
    return validate_items(table, origin=str(path))


def select_items(
    items: pd.DataFrame,
    *,
    languages: list[str] | None = None,
    variants: list[str] | None = None,
    sources: list[str] | None = None,
    drop_collapsed: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep the requested languages/variants/sources; return (kept, collapsed) tables.

    English originals are always kept: every comparison is paired against them.
    Collapsed versions are returned separately so a chapter can count and show them.
    """
    keep = pd.Series(True, index=items.index)
    if languages is not None:
        keep &= items["language"].isin(languages) | (items["variant"] == "original")
    if variants is not None:
        keep &= items["variant"].isin(variants) | (items["variant"] == "original")
    if sources is not None:
        keep &= items["source"].isin(sources)
    kept = items.loc[keep]
    collapsed_mask = is_collapsed(kept) if drop_collapsed else pd.Series(False, index=kept.index)
    return kept.loc[~collapsed_mask].reset_index(drop=True), kept.loc[collapsed_mask].reset_index(drop=True)


BANK_LANGUAGES: tuple[str, ...] = ("es", "fr", "zh", "ar", "ko", "sw", "hi")
BANK_REWORDINGS: tuple[str, ...] = ("human-1", "human-2", "human-3")


def bank_problems(
    items: pd.DataFrame,
    *,
    origin: str = "<table>",
    languages: tuple[str, ...] = BANK_LANGUAGES,
    rewordings: tuple[str, ...] = BANK_REWORDINGS,
    third_similarity: float = 0.85,
) -> pd.DataFrame:
    """Checks beyond the row contract, for the project's own bank: one row per problem.

    Columns: origin, row (CSV line), field, problem, severity. `error`: a base item lacks a
    translation or an English rewording, or its third option nearly repeats a candidate
    (similarity of normalised texts >= `third_similarity`, difflib ratio), which would make
    fluency meaningless. `collapsed`: a version whose contrast is gone (reported and
    excluded from analyses, not an error: a language may be unable to keep a contrast).
    """

    problems: list[dict] = []

    def add(position: int, field: str, problem: str, severity: str = "error") -> None:
        problems.append({"origin": origin, "row": position + 2, "field": field, "problem": problem,
                         "severity": severity})

    table = items.reset_index(drop=True)
    for base_id, versions in table.groupby("base_id", sort=False):
        first = int(versions.index[0])
        present = set(versions.loc[versions["variant"] == "translation", "language"])
        for language in languages:
            if language not in present:
                add(first, "language", f"{base_id}: no translation into {language!r}")
        english_rewordings = set(versions.loc[(versions["variant"] == "rewording") & (versions["language"] == "en"),
                                              "via"])
        for via in rewordings:
            if via not in english_rewordings:
                add(first, "via", f"{base_id}: no English rewording {via!r}")
    for position, row in table.iterrows():
        third = normalise(row["third"])
        for option in ("stereotyped", "anti_stereotyped"):
            ratio = SequenceMatcher(None, third, normalise(row[option])).ratio()
            if ratio >= third_similarity:
                add(int(position), "third", f"{row['item_id']}: third option is {ratio:.2f} similar to {option}")
    for position in table.index[is_collapsed(table)]:
        add(int(position), "anti_stereotyped", f"{table.loc[position, 'item_id']}: contrast collapsed",
            severity="collapsed")
    return pd.DataFrame(problems, columns=["origin", "row", "field", "problem", "severity"])
