"""Counts said as words, for every message and page: "1 problem", "2 problems", never "problem(s)"."""

from __future__ import annotations


def plural(n: int, singular: str, many: str | None = None) -> str:
    """The noun for `n` things: "column" for 1, "columns" otherwise (or `many`)."""
    return singular if n == 1 else (many or singular + "s")


def counted(n: int, singular: str, many: str | None = None) -> str:
    """"1 template", "2 templates", "0 templates"."""
    return f"{n} {plural(n, singular, many)}"
