"""What a chapter hands its notebook: tables, figures, and the values its prose quotes.

A chapter function (`biasaudit.book.chapters`) computes everything in the library, where it is tested;
the notebook only calls it, glues the values into its Markdown (`Report.glue`), and shows the
tables and figures. Tables are shown for reading (`readable`): named columns, rounded numbers,
counts as integers, no positional index, no all-empty columns, long text wrapped, and any text
from the data escaped, so an item that contains `<script>` or `**bold**` shows as written. A
column that holds one value in every row of a longer table is said once, in the caption ("in every
row: items 64"), so that a table keeps to the columns that differ. A table that would still be wider
than the reader's text column (`widths.TEXT_COLUMN_PX`, measured with the book's fonts) is shown as
several tables one under the other, each led by the columns that name a row (`SplitTable`), so no
column is ever cut off; Korean text keeps its words whole where a cell wraps.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from IPython.display import Markdown
from myst_nb import glue

from biasaudit.book import widths
from biasaudit.book.prose import spoken_list  # noqa: F401  (chapters import it from here)

# Wrap long text in table cells instead of stretching the page (the cells' font size is _static/book.css's;
# `widths` measures with both).
_CELL_STYLE = [{"selector": "td", "props": [("white-space", "normal"), ("max-width", "28em"),
                                            ("vertical-align", "top"), ("padding", "0.15em 0.5em")]},
               {"selector": "th", "props": [("text-align", "left"), ("padding", "0.15em 0.5em")]}]


@dataclass(frozen=True)
class TableStyle:
    """How one table is shown: which columns under which names, and how numbers are written.

    `columns` maps a column to its shown name (and selects and orders them; None keeps all);
    `decimals` is the default number of decimals, `percent` the columns shown as percentages,
    `index` a column to show as the row label (none: no index at all). `empty` is the sentence
    shown instead of an empty table; "" shows nothing, where the chapter's prose already says why
    the section has no data (one sentence, not two).
    """

    columns: dict[str, str] | None = None
    decimals: int = 3
    empty: str = "This run has no rows for this table."
    percent: tuple[str, ...] = ()
    formats: dict[str, Any] = field(default_factory=dict)  # a format string or a function of the value
    caption: str = ""
    fold_constant: bool = True  # columns with one value in every row (of 2 or more) go to the caption
    transpose: bool = False  # one column per row of the table (few rows, many measures), first column as headers
    # The leading columns that name a row, repeated in each part of a table split to fit the page; None: the
    # leading text columns (at most two).
    keys: int | None = None


def readable(table: pd.DataFrame, style: TableStyle = TableStyle()):
    """A pandas Styler of `table` for reading (see the module docstring)."""
    shown = table.copy()
    if style.columns is not None:
        missing = [c for c in style.columns if c not in shown.columns]
        if missing:
            raise KeyError(f"readable: columns {missing} are not in the table ({list(shown.columns)})")
        shown = shown[list(style.columns)].rename(columns=style.columns)
    names = style.columns or {c: c for c in shown.columns}
    shown = shown.loc[:, [c for c in shown.columns if not _empty(shown[c])]] if len(shown) else shown
    formats: dict[str, Any] = {}
    for column in shown.columns:
        source = next((k for k, v in names.items() if v == column), column)
        values = shown[column]
        if source in style.formats:
            formats[column] = style.formats[source]
        elif source in style.percent:
            formats[column] = "{:.0%}"
        elif pd.api.types.is_bool_dtype(values):
            formats[column] = lambda v: "yes" if v is True or v == 1 else ("no" if v is False or v == 0 else "")
        elif pd.api.types.is_integer_dtype(values) or _is_count(str(source), values):
            formats[column] = lambda v: "" if pd.isna(v) else f"{int(v):,}"
        elif pd.api.types.is_float_dtype(values):
            formats[column] = f"{{:.{style.decimals}f}}"
    caption = style.caption
    if style.transpose:
        shown, formats = _transposed(shown, formats), {}
    folded = _constant_columns(shown) if style.fold_constant and not style.transpose else []
    if folded:
        said = "; ".join(f"{column} {_quoted(_written(shown[column].iloc[0], formats.get(column)))}" for column in folded)
        caption = f"{caption} In every row: {said}.".strip()
        shown = shown.drop(columns=folded)
    formats = {c: f for c, f in formats.items() if c in shown.columns}
    lead, parts = fitting_parts(shown, formats, style.keys)
    if len(parts) == 1:
        return _styled(shown, formats, caption)
    return SplitTable([_styled(shown[lead + own], formats, caption if k == 1 else
                               f"The table above, continued ({k} of {len(parts)}): {spoken_list([str(c) for c in own])}.")
                       for k, own in enumerate(parts, 1)])


def _styled(shown: pd.DataFrame, formats: dict[str, Any], caption: str):
    styler = shown.style.format(formats, na_rep="", escape="html").hide(axis="index")
    # the class says its cells are the data as it is (an item's text may hold "**" or "<b>" on purpose)
    styler = styler.set_table_styles(_CELL_STYLE).map(_keep_korean_words).set_table_attributes('class="ba-data"')
    if caption:
        styler = styler.set_caption(html.escape(caption))
    return styler


def _keep_korean_words(value: Any) -> str:
    """Korean breaks between any two syllables by default; keep its words whole, as Korean is written."""
    return "word-break: keep-all" if isinstance(value, str) and any("\uac00" <= c <= "\ud7af" for c in value) else ""


class SplitTable:
    """A table shown as several, one under the other (each a pandas Styler), where one would not fit."""

    def __init__(self, parts: list) -> None:
        self.parts = parts

    def to_html(self) -> str:
        return "\n".join(part.to_html() for part in self.parts)

    def _repr_html_(self) -> str:
        return self.to_html()


def shown_text(shown: pd.DataFrame, formats: dict[str, Any]) -> list[list[str]]:
    """Every body cell of `shown` as the page writes it."""
    return [["" if pd.isna(v) else _written(v, formats.get(c)) for v in shown[c]] for c in shown.columns]


def fitting_parts(shown: pd.DataFrame, formats: dict[str, Any], keys: int | None = None,
                  limit: float = widths.TEXT_COLUMN_PX) -> tuple[list, list[list]]:
    """(key columns, the other columns of each table to show): one table where it fits `limit` px,
    else the fewest tables that fit, the other columns dealt out evenly and in order, each table led
    by the key columns (the leading text columns, at most two, unless `keys` says)."""
    columns = list(shown.columns)
    text = shown_text(shown, formats)
    width = {c: widths.column_widths([str(c)], [[v] for v in cells])[0] for c, cells in zip(columns, text)}

    def fits(group: list) -> bool:
        return widths.table_px([width[c] for c in group]) <= limit

    if fits(columns) or len(columns) < 3:
        return [], [columns]
    if keys is None:
        keys = 1
        while keys < 2 and keys < len(columns) - 2 and not pd.api.types.is_numeric_dtype(shown.iloc[:, keys]):
            keys += 1
    lead, rest = columns[:keys], columns[keys:]
    greedy: list[list] = []
    for column in rest:
        if greedy and fits(lead + greedy[-1] + [column]):
            greedy[-1].append(column)
        else:
            greedy.append([column])
    even = [list(chunk) for chunk in np.array_split(np.array(rest, dtype=object), len(greedy))]
    return lead, even if all(fits(lead + part) for part in even) else greedy


def interval_column(low: pd.Series, high: pd.Series, decimals: int = 3) -> list[str]:
    """"[low, high]" per row (one column instead of two), empty where there is no interval."""
    return ["" if pd.isna(a) or pd.isna(b) else f"[{a:.{decimals}f}, {b:.{decimals}f}]" for a, b in zip(low, high)]


def with_interval(value: pd.Series, low: pd.Series, high: pd.Series, decimals: int = 3) -> list[str]:
    """"value [low, high]" per row: an estimate and its interval in one column; the value alone where
    there is no interval."""
    return [("" if pd.isna(v) else f"{v:.{decimals}f}") + (f" [{a:.{decimals}f}, {b:.{decimals}f}]"
                                                           if not (pd.isna(a) or pd.isna(b)) else "")
            for v, a, b in zip(value, low, high)]


def _transposed(shown: pd.DataFrame, formats: dict[str, Any]) -> pd.DataFrame:
    """Each value written as its column shows it, then rows as columns, headed by the first column."""
    text = pd.DataFrame({c: ["" if pd.isna(v) else _written(v, formats.get(c)) for v in shown[c]] for c in shown})
    first = text.columns[0]
    return text.set_index(first).T.rename_axis(index="", columns=None).reset_index()


def _constant_columns(shown: pd.DataFrame) -> list[str]:
    """Columns after the first holding one (non-empty) value in every row, in tables of 2 rows or more;
    none where no number column would be left that varies (a table of keys alone says nothing)."""
    if len(shown) < 2 or shown.shape[1] < 3:
        return []
    constant = [c for c in shown.columns[1:] if shown[c].notna().all() and shown[c].nunique() == 1]
    numbers = [c for c in shown.columns
               if pd.api.types.is_numeric_dtype(shown[c]) and not pd.api.types.is_bool_dtype(shown[c])]
    return constant if any(c not in constant for c in numbers) else []


def _empty(values: pd.Series) -> bool:
    """Nothing in any row: missing, or blank text (an interval where there is none to give)."""
    blank = values.isna() | values.map(lambda v: isinstance(v, str) and not v.strip())
    return bool(blank.all())


def _quoted(text: str) -> str:
    """A value said in a caption's sentence: text in quotation marks (its own punctuation stays inside them),
    a number or a single word as it is."""
    return f"“{text}”" if " " in text.strip() or text.rstrip()[-1:] in ".,;:!?" else text


def _written(value: Any, fmt: Any) -> str:
    """`value` as its column shows it."""
    if fmt is None:
        return str(value)
    return fmt(value) if callable(fmt) else fmt.format(value)


def _is_count(name: str, values: pd.Series) -> bool:
    """A float column that holds counts (NaN made it float): named like a count, whole numbers only."""
    if not pd.api.types.is_float_dtype(values):
        return False
    known = values.dropna().to_numpy()
    counted = name == "n" or name.startswith(("n_", "reliable_", "cells_")) or name.endswith("_count")
    return counted and bool(np.all(known == np.round(known)))


@dataclass
class Report:
    """A chapter's tables, figures and quoted values."""

    values: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    styles: dict[str, TableStyle] = field(default_factory=dict)

    def add_table(self, name: str, table: pd.DataFrame, style: TableStyle | None = None) -> pd.DataFrame:
        self.tables[name] = table
        if style is not None:
            self.styles[name] = style
        return table

    def table(self, name: str):
        """The table `name`, formatted for reading; a one-line note instead of an empty table."""
        style = self.styles.get(name, TableStyle())
        if self.tables[name].empty:
            return note(style.empty) if style.empty else None
        return readable(self.tables[name], style)

    def figure(self, name: str):
        """The figure `name`; None (nothing shown) where the prose says there is nothing to draw."""
        return self.figures[name]

    def glue(self) -> None:
        """Glue every value for the notebook's Markdown ({glue:text}`name`), without displaying it."""

        for name, value in self.values.items():
            glue(name, _plain(value), display=False)


def note(text: str):
    """A one-line note shown where a table or chart would be, when a run has no data for it."""

    return Markdown(f"*{text}*")


def _plain(value: Any) -> Any:
    """numpy scalars as Python values, so that glued numbers format like Python's."""
    return value.item() if isinstance(value, np.generic) else value
