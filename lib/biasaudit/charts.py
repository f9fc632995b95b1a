"""Altair charts for the book. Notebooks call `use_svg()` once: charts then render as inline SVG
through vl-convert, so the book shows them offline (the default renderer loads Vega from a CDN)."""

from __future__ import annotations

import altair as alt
import pandas as pd


def use_svg() -> None:
    """Render every chart in this kernel as static SVG."""
    alt.renderers.enable("svg")


def drop_bars(drops: pd.DataFrame, title: str = "Drop vs English (mean over models, 95% interval across models)") -> alt.Chart:
    """Bars of each language's drop with its interval; positive = lower score than English."""
    data = drops.loc[drops["language"] != "en"]
    base = alt.Chart(data).encode(y=alt.Y("language:N", sort=None, title="language"))
    bars = base.mark_bar().encode(
        x=alt.X("drop:Q", title="drop in soft score (English − language)"),
        tooltip=["language", alt.Tooltip("drop:Q", format=".3f"), "reliable_drops:Q"],
    )
    rules = base.mark_rule().encode(x="drop_low:Q", x2="drop_high:Q")
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(x="x:Q")
    return (bars + rules + zero).properties(width=420, height=22 * len(data) + 20, title=title)


def drop_heatmap(cells: pd.DataFrame, group: str = "language", title: str = "Drop by model and language") -> alt.Chart:
    """Model × language heatmap of drops; cells whose drop is reliable (BH q < alpha) are marked •."""
    data = cells.assign(mark=cells["reliable"].map({True: "•", False: ""}), label=cells["drop"].round(3))
    limit = float(max(abs(data["drop"].min()), abs(data["drop"].max()), 1e-3))
    base = alt.Chart(data).encode(
        x=alt.X(f"{group}:N", title=group),
        y=alt.Y("model:N", title="model"),
    )
    heat = base.mark_rect().encode(
        color=alt.Color("drop:Q", scale=alt.Scale(scheme="redblue", domain=[-limit, limit], reverse=True),
                        title="drop"),
        tooltip=["model", group, alt.Tooltip("drop:Q", format=".3f"), alt.Tooltip("q:Q", format=".3f"), "n"],
    )
    text = base.mark_text(fontSize=11).encode(text=alt.Text("label:Q", format=".3f"))
    star = base.mark_text(dy=-12, fontSize=14).encode(text="mark:N")
    return (heat + text + star).properties(width=60 * data[group].nunique(), height=40 * data["model"].nunique(),
                                           title=title)
