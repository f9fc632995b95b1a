"""Altair charts for the book. Notebooks call `use_svg()` once: charts then render as inline SVG
through vl-convert, so the book shows them offline (the default renderer loads Vega from a CDN)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from biasaudit.analyses import verdict
from biasaudit.analyses.floor import model_floors
from biasaudit.book import widths
from biasaudit.data.languages import language_label


def _book_theme() -> alt.theme.ThemeConfig:
    """Labels and titles are never cut short with "…" (Vega's default limits are 160–180 px): a chart is
    laid out wide enough for them instead, and `check_html` fails a chart that is not."""
    # Legends go under the chart, one entry a line, so a chart is no wider than its plot and axes, which
    # each chart sizes to the reader's text column (`widths.TEXT_COLUMN_PX`).
    return alt.theme.ThemeConfig({"config": {
        "legend": {"labelLimit": 0, "titleLimit": 0, "orient": "bottom", "symbolDirection": "vertical",
                   "gradientDirection": "horizontal"},
        "axis": {"labelLimit": 0, "titleLimit": 0}}})


def use_svg() -> None:
    """Render every chart in this kernel as static SVG, in the book's theme."""
    alt.renderers.enable("svg")
    alt.theme.register("biasaudit", enable=True)(_book_theme)


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


def _zero_rule(axis: str = "x", value: float = 0.0) -> alt.Chart:
    return alt.Chart(pd.DataFrame({"v": [value]})).mark_rule(strokeDash=[4, 4], color="gray").encode(
        **{axis: "v:Q"})


def floor_bars(floor: pd.DataFrame, title: str = "Noise floor by rewording route") -> alt.Chart:
    """Bars of each route's floor (median over models of |English − reworded|) with a tick at the
    noise-only value (what pure scatter gives); the "all routes" row is left out."""
    data = floor.loc[floor["via"] != "all routes"]
    base = alt.Chart(data).encode(y=alt.Y("via:N", sort=None, title="rewording route"))
    bars = base.mark_bar(color="#8da0cb").encode(
        x=alt.X("floor:Q", title="floor: |English − reworded| (median over models)"),
        tooltip=["via", alt.Tooltip("floor:Q", format=".4f"), alt.Tooltip("noise_only:Q", format=".4f"),
                 "reliable_cells:Q", "n_cells:Q", alt.Tooltip("same_choice:Q", format=".2f")],
    )
    ticks = base.mark_tick(color="black", thickness=2, size=18).encode(x="noise_only:Q")
    return (bars + ticks).properties(width=420, height=28 * len(data) + 20, title=alt.TitleParams(
        title, subtitle="bar: floor; black tick: noise only, s·sqrt(2/π)/sqrt(n)"))


def gap_minus_floor(gaps: pd.DataFrame, title: str = "Gap − floor per model (95% bootstrap interval)") -> alt.Chart:
    """Forest plot of each model's gap − floor with its interval; intervals wholly above zero are
    drawn in a second colour."""
    data = gaps.assign(interval=gaps["above_floor"].map({True: "above zero", False: "includes zero"}))
    order = data.sort_values("gap_minus_floor")["model"].tolist()
    base = alt.Chart(data).encode(y=alt.Y("model:N", sort=order, title="model"))
    colour = alt.Color("interval:N", scale=alt.Scale(domain=["includes zero", "above zero"],
                                                     range=["#7f7f7f", "#d95f02"]), title="interval")
    rules = base.mark_rule(strokeWidth=2).encode(x=alt.X("low:Q", title="gap − floor (soft score)"), x2="high:Q",
                                                 color=colour)
    points = base.mark_point(filled=True, size=60).encode(
        x="gap_minus_floor:Q", color=colour,
        tooltip=["model", alt.Tooltip("gap:Q", format=".4f"), alt.Tooltip("floor:Q", format=".4f"),
                 alt.Tooltip("gap_minus_floor:Q", format=".4f"), alt.Tooltip("low:Q", format=".4f"),
                 alt.Tooltip("high:Q", format=".4f"), "reliable_drops:Q"],
    )
    return (rules + points + _zero_rule()).properties(width=420, height=30 * len(data) + 20, title=title)


def binned_counts(pairs: pd.DataFrame, x: str, y: str, bins: int = 20) -> pd.DataFrame:
    """Counts of (x, y) pairs in a bins × bins grid over [0, 1]²: a density plot draws these few
    hundred cells, not every pair, so it reads (and renders) the same at any number of items."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    counts, _, _ = np.histogram2d(pairs[x].clip(0, 1), pairs[y].clip(0, 1), bins=[edges, edges])
    i, j = np.nonzero(counts)
    return pd.DataFrame({f"{x}_start": edges[i], f"{x}_end": edges[i + 1], f"{y}_start": edges[j],
                         f"{y}_end": edges[j + 1], "pairs": counts[i, j].astype(int)})


def carry_over_density(
    pairs: pd.DataFrame,
    table: pd.DataFrame,
    changes: tuple[str, ...] = ("rewording", "translation"),
    bins: int = 20,
) -> alt.HConcatChart:
    """Before/after density of item scores for each kind of change (counts binned in pandas), with
    the least-squares line (every model × item pair pooled, the paper's fit, from `carry_over_table`'s "all" row or its only
    group) and the identity line (perfect carry-over)."""
    panels = []
    for change in changes:
        data = pairs.loc[pairs["change"] == change, ["before", "after"]]
        if data.empty:
            continue
        rows = table.loc[table["change"] == change]
        fit = rows.loc[rows["group"] == "all"] if (rows["group"] == "all").any() else rows.head(1)
        fit = fit.iloc[0]
        ends = pd.DataFrame({"before": [0.0, 1.0]})
        ends["after"] = fit["mean_after"] + fit["slope"] * (ends["before"] - fit["mean_before"])
        ends["line"] = "least squares"
        identity = pd.DataFrame({"before": [0.0, 1.0], "after": [0.0, 1.0], "line": "identity (slope 1)"})
        lines = pd.concat([ends, identity], ignore_index=True)
        scale = alt.Scale(domain=[0, 1])
        heat = alt.Chart(binned_counts(data, "before", "after", bins)).mark_rect().encode(
            x=alt.X("before_start:Q", scale=scale, title="soft score before"), x2="before_end:Q",
            y=alt.Y("after_start:Q", scale=scale, title="soft score after"), y2="after_end:Q",
            color=alt.Color("pairs:Q", scale=alt.Scale(scheme="greys"), title="pairs"),
        )
        line = alt.Chart(lines).mark_line(clip=True).encode(
            x=alt.X("before:Q", scale=scale), y=alt.Y("after:Q", scale=scale),
            strokeDash=alt.StrokeDash("line:N", title=None, scale=alt.Scale(
                domain=["identity (slope 1)", "least squares"], range=[[1, 0], [6, 4]])),
            color=alt.value("#d95f02"),
        )
        panels.append((heat + line).properties(width=260, height=260, title=alt.TitleParams(
            change, subtitle=f"slope {fit['slope']:.2f}, r {fit['r']:.2f}, {len(data):,} pairs")))
    return alt.hconcat(*panels).resolve_scale(color="independent")


def box_summary(data: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
    """Per group: quartiles, median and Tukey whiskers (the most extreme values within 1.5 IQR), so a
    box plot draws one row per group whatever the number of values."""
    def summarise(values: pd.Series) -> pd.Series:
        q1, median, q3 = values.quantile([0.25, 0.5, 0.75])
        inside = values[(values >= q1 - 1.5 * (q3 - q1)) & (values <= q3 + 1.5 * (q3 - q1))]
        return pd.Series({"low": inside.min(), "q1": q1, "median": median, "q3": q3, "high": inside.max(),
                          "n": len(values)})

    return data.groupby(by, sort=False)[value].apply(summarise).unstack().reset_index()


def similarity_boxes(pairs: pd.DataFrame, *, order: list[str], threshold: float, title: str) -> alt.FacetChart:
    """Box plots of similarity to the English original, translation against unrelated item, per
    language, with a dashed rule at the faithful threshold."""
    boxes = box_summary(pairs, "similarity", ["language", "pair"])
    base = alt.Chart().encode(y=alt.Y("pair:N", title=None, axis=None), color=alt.Color("pair:N", title=None))
    whiskers = base.mark_rule().encode(x=alt.X("low:Q", scale=alt.Scale(zero=False),
                                               title="cosine similarity to the English original"), x2="high:Q")
    box = base.mark_bar(size=12).encode(x="q1:Q", x2="q3:Q", tooltip=["language", "pair", "n:Q",
                                                                       alt.Tooltip("median:Q", format=".3f")])
    median = base.mark_tick(color="black", size=12).encode(x="median:Q")
    rule = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(x=alt.datum(threshold))
    return alt.layer(whiskers, box, median, rule, data=boxes).properties(width=420, height=34).facet(
        row=alt.Row("language:N", title=None, sort=order, header=alt.Header(labelAngle=0, labelAlign="left")),
        title=title)


def carry_over_intervals(table: pd.DataFrame, title: str = "Carry-over with 95% bootstrap intervals") -> alt.FacetChart:
    """r, SD ratio and slope (slope = r × SD ratio) per group, one panel per measure, coloured by
    the kind of change."""
    long = []
    for measure in ("r", "sd_ratio", "slope"):
        long.append(table.assign(measure=measure, value=table[measure], low=table[f"{measure}_low"],
                                 high=table[f"{measure}_high"]))
    data = pd.concat(long, ignore_index=True)[["change", "group", "measure", "value", "low", "high"]]
    data["row"] = data["change"] + " · " + data["group"].astype(str)
    base = alt.Chart().encode(y=alt.Y("row:N", sort=None, title=None),
                              color=alt.Color("change:N", title="change"))
    rules = base.mark_rule().encode(x=alt.X("low:Q", title=None), x2="high:Q")
    points = base.mark_point(filled=True).encode(
        x="value:Q", tooltip=["row", "measure", alt.Tooltip("value:Q", format=".3f"),
                              alt.Tooltip("low:Q", format=".3f"), alt.Tooltip("high:Q", format=".3f")])
    one = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(x=alt.datum(1.0))
    # three panels and the row labels (10 px) in the reader's text column
    labels = max((widths.text_px(str(row), font_px=10.0) for row in data["row"].unique()), default=0.0)
    width = max(100, int((widths.TEXT_COLUMN_PX - labels - 80) / 3))
    return alt.layer(rules, points, one, data=data).properties(width=width, height=18 * data["row"].nunique()).facet(
        column=alt.Column("measure:N", sort=["r", "sd_ratio", "slope"], title=None)
    ).resolve_scale(x="independent").properties(title=title)


def strength_bars(table: pd.DataFrame, title: str = "Strength |soft − 0.5| before and after") -> alt.Chart:
    """Mean strength of the items' preferences before and after each change, per group."""
    rows = table.loc[table["group"] != "all"]
    data = pd.concat([
        rows.assign(when="before", strength=rows["strength_before"]),
        rows.assign(when="after", strength=rows["strength_after"]),
    ], ignore_index=True)
    data["row"] = data["change"] + " · " + data["group"].astype(str)
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y("row:N", sort=None, title=None),
        yOffset=alt.YOffset("when:N", sort=["before", "after"]),
        x=alt.X("strength:Q", title="mean |soft − 0.5|"),
        color=alt.Color("when:N", sort=["before", "after"], scale=alt.Scale(range=["#bdbdbd", "#1b9e77"]),
                        title=None),
        tooltip=["row", "when", alt.Tooltip("strength:Q", format=".3f")],
    ).properties(width=380, title=title)


def detection_curve(
    power: pd.DataFrame,
    observed: tuple[float, float] | None = None,
    alpha: float = 0.05,
    title: str = "Share of injected shifts detected",
) -> alt.LayerChart:
    """Detected share (with ±2 standard errors) against the injected shift δ; a dashed line at
    alpha, and a shaded band over the range of the run's observed language drops."""
    data = power.assign(low=(power["detected"] - 2 * power["detected_se"]).clip(lower=0),
                        high=(power["detected"] + 2 * power["detected_se"]).clip(upper=1))
    x = alt.X("delta:Q", title="injected shift δ (soft score)")
    layers = []
    if observed is not None and all(pd.notna(v) for v in observed):
        band = pd.DataFrame({"start": [min(observed)], "end": [max(observed)], "what": ["observed language drops"]})
        layers.append(alt.Chart(band).mark_rect(opacity=0.18, color="#d95f02").encode(
            x="start:Q", x2="end:Q", tooltip=["what", alt.Tooltip("start:Q", format=".4f"),
                                              alt.Tooltip("end:Q", format=".4f")]))
    area = alt.Chart(data).mark_area(opacity=0.25, color="#1f77b4").encode(x=x, y="low:Q", y2="high:Q")
    line = alt.Chart(data).mark_line(point=True, color="#1f77b4").encode(
        x=x, y=alt.Y("detected:Q", title="share of cells called reliable", scale=alt.Scale(domain=[0, 1])),
        tooltip=[alt.Tooltip("delta:Q", format=".3f"), alt.Tooltip("detected:Q", format=".3f"),
                 alt.Tooltip("any_detected:Q", format=".3f")],
    )
    level = alt.Chart(pd.DataFrame({"v": [alpha]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="v:Q")
    return alt.layer(*layers, area, line, level).properties(width=440, height=260, title=alt.TitleParams(
        title, subtitle=f"dashed: alpha = {alpha}; shaded: range of the observed language drops"))


def forest(
    data: pd.DataFrame,
    *,
    label: str,
    estimate: str,
    low: str,
    high: str,
    color: str | None = None,
    title: str = "",
    x_title: str = "drop in soft score (English − language)",
    reference: float = 0.0,
) -> alt.LayerChart:
    """Intervals (low to high) with a dot at the estimate, one row per `label` (side by side per
    `color` when given), and a dashed rule at `reference`; rows keep the table's order."""
    data = data.loc[data[estimate].notna()]
    order = list(dict.fromkeys(data[label].astype(str)))
    y = alt.Y(f"{label}:N", sort=order, title=None)
    encoding: dict = {"y": y}
    if color:
        encoding["yOffset"] = alt.YOffset(f"{color}:N", sort=list(dict.fromkeys(data[color].astype(str))))
        encoding["color"] = alt.Color(f"{color}:N", title=color.replace("_", " "), sort=list(dict.fromkeys(data[color])))
    tooltip = [label, *([color] if color else []), alt.Tooltip(f"{estimate}:Q", format=".4f"),
               alt.Tooltip(f"{low}:Q", format=".4f"), alt.Tooltip(f"{high}:Q", format=".4f")]
    base = alt.Chart(data).encode(**encoding)
    rules = base.mark_rule(strokeWidth=2).encode(x=alt.X(f"{low}:Q", title=x_title), x2=f"{high}:Q")
    points = base.mark_point(filled=True, size=60).encode(x=f"{estimate}:Q", tooltip=tooltip)
    per_row = 16 * (data[color].nunique() if color else 1) + 10
    return (rules + points + _zero_rule("x", reference)).properties(
        width=420, height=per_row * len(order) + 20, title=title)


def paired_bars(
    data: pd.DataFrame,
    *,
    label: str,
    columns: dict[str, str],
    title: str = "",
    x_title: str = "",
    what: str = "measure",
) -> alt.Chart | None:
    """Side-by-side bars of several columns (`columns`: column → legend name) per `label` row; None (no
    chart) where every value is missing."""
    long = pd.concat([data[[label]].assign(**{what: name, "value": data[column]}) for column, name in columns.items()],
                     ignore_index=True).dropna(subset=["value"])
    if long.empty:
        return None
    order = list(dict.fromkeys(data[label].astype(str)))
    return alt.Chart(long).mark_bar().encode(
        y=alt.Y(f"{label}:N", sort=order, title=None, axis=alt.Axis(labelLimit=400)),  # labels whole, not cut
        yOffset=alt.YOffset(f"{what}:N", sort=list(columns.values())),
        x=alt.X("value:Q", title=x_title),
        color=alt.Color(f"{what}:N", sort=list(columns.values()), title=None),
        tooltip=[label, what, alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=400, height=(12 * len(columns) + 8) * len(order) + 20, title=title)


def aggregate_scatter(table: pd.DataFrame, title: str = "Drop per language: per-token mean against summed") -> alt.LayerChart:
    """Each language's drop with per-token mean log-probs (x) against summed log-probs (y), with the
    identity line: points off the line are languages whose result depends on the aggregate."""
    data = table.loc[table["language"] != "en"]
    limit = float(np.nanmax(np.abs(data[["drop_mean", "drop_sum"]].to_numpy()))) if len(data) else 0.1
    limit = max(limit * 1.15, 0.01)
    scale = alt.Scale(domain=[-limit, limit])
    identity = alt.Chart(pd.DataFrame({"x": [-limit, limit], "y": [-limit, limit]})).mark_line(
        strokeDash=[4, 4], color="gray").encode(x=alt.X("x:Q", scale=scale), y=alt.Y("y:Q", scale=scale))
    points = alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=alt.X("drop_mean:Q", scale=scale, title="drop, per-token mean log-probs"),
        y=alt.Y("drop_sum:Q", scale=scale, title="drop, summed log-probs"),
        tooltip=["language", alt.Tooltip("drop_mean:Q", format=".3f"), alt.Tooltip("drop_sum:Q", format=".3f"),
                 alt.Tooltip("token_gap:Q", format=".2f")],
    )
    labels = points.mark_text(dx=10, align="left").encode(text="language:N")
    return (identity + points + labels).properties(width=300, height=300, title=title)


def case_heatmap(case: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """One item's soft score in every version (rows) and model (columns): colour from
    anti-stereotyped (blue) through 0.5 to stereotyped (red); the value is printed, in bold where
    the model chooses the stereotyped continuation."""
    data = case.assign(version=np.where(case["variant"] == "rewording", case["language"] + " ~ " + case["via"],
                                        np.where(case["variant"] == "original", "en (original)", case["language"])))
    order = list(dict.fromkeys(data["version"]))
    # the models' columns share the reader's text column; their names slant where a column is too narrow
    labels = max((widths.text_px(str(v), font_px=10.0) for v in order), default=0.0) + 20
    models = data["model"].unique()
    column = max(40, min(110, int((widths.TEXT_COLUMN_PX - labels - 30) / len(models))))
    widest = max((widths.text_px(str(m), font_px=10.0) for m in models), default=0.0)
    base = alt.Chart(data).encode(y=alt.Y("version:N", sort=order, title=None),
                                  x=alt.X("model:N", title=None, axis=alt.Axis(
                                      labelAngle=0 if widest < column - 6 else -40, orient="top")))
    heat = base.mark_rect().encode(
        color=alt.Color("soft:Q", scale=alt.Scale(scheme="redblue", domain=[0, 1], reverse=True), title="soft"),
        tooltip=["model", "version", alt.Tooltip("soft:Q", format=".3f"), "choice"])
    plain = base.mark_text(fontSize=11).encode(text=alt.Text("soft:Q", format=".2f")).transform_filter(
        alt.datum.choice != "stereotyped")
    bold = base.mark_text(fontSize=11, fontWeight="bold").encode(text=alt.Text("soft:Q", format=".2f")).transform_filter(
        alt.datum.choice == "stereotyped")
    return (heat + plain + bold).properties(width=column * len(models), height=24 * len(order), title=title)



def polar_pass_rates(rates: pd.DataFrame, title: str = "Pass rate by language, per concern and model",
                     size: int = 120) -> alt.FacetChart:
    """One polar chart per concern (MLA-BiTe's Figure 4), one row per model: a slice per language, at
    the same angle in every chart (English first), its area proportional to the pass rate (radius
    √rate, so 25 % reaches half-way and 100 % the grey rim).

    The angles and the radius range are set here, not left to Vega-Lite: in a faceted chart it
    stacks the slices apart per radius value (each a full circle) and sizes the radius by the outer
    chart's width, which is 0, so every slice had zero size."""
    data = rates.dropna(subset=["pass_rate"])
    order = sorted(data["language"].unique(), key=lambda language: (language != "en", language))
    position = {language: index for index, language in enumerate(order)}
    data = data.assign(start=data["language"].map(position).astype(float))
    data = data.assign(end=data["start"] + 1)
    theta = alt.Theta("start:Q", stack=None, scale=alt.Scale(domain=[0, max(1, len(order))], range=[0, 2 * np.pi]))
    rim = alt.Chart().mark_arc(color="#eeeeee", stroke="white", outerRadius=size / 2).encode(theta=theta,
                                                                                         theta2="end:Q")
    slices = alt.Chart().mark_arc(stroke="white").encode(
        theta=theta, theta2="end:Q",
        radius=alt.Radius("pass_rate:Q", scale=alt.Scale(type="sqrt", domain=[0, 1], range=[0, size / 2], zero=True)),
        color=alt.Color("language:N", title="language", sort=order),
        tooltip=["model", "concern", "language", alt.Tooltip("pass_rate:Q", format=".0%"), "passed:Q", "total:Q"])
    return alt.layer(rim, slices, data=data).properties(width=size, height=size).facet(
        column=alt.Column("concern:N", title=None), row=alt.Row("model:N", title=None), title=title)


def pass_rate_heatmap(rates: pd.DataFrame, title: str = "Pass rate by model and language") -> alt.LayerChart:
    """Language × model pass rates (MLA-BiTe's Figure 5), the rate printed in each cell; English first."""
    data = rates.dropna(subset=["pass_rate"])
    order = sorted(data["language"].unique(), key=lambda language: (language != "en", language))
    base = alt.Chart(data).encode(x=alt.X("language:N", title="language", sort=order, axis=alt.Axis(labelAngle=0)),
                                  y=alt.Y("model:N", title="model"))
    heat = base.mark_rect().encode(color=alt.Color("pass_rate:Q", scale=alt.Scale(domain=[0, 1], scheme="greens"),
                                                   title="pass rate"),
                                   tooltip=["model", "language", alt.Tooltip("pass_rate:Q", format=".0%"),
                                            "passed:Q", "failed:Q", "errors:Q"])
    text = base.mark_text(fontSize=11).encode(text=alt.Text("pass_rate:Q", format=".0%"))
    return (heat + text).properties(width=50 * data["language"].nunique(), height=40 * data["model"].nunique(),
                                    title=title)


def correlation_heatmap(correlations: pd.DataFrame,
                        title: str = "Correlation of pass rates between languages (over concerns)") -> alt.FacetChart:
    """Per model, the Pearson r between every two languages' pass rates per concern (MLA-BiTe's Figure 6);
    English first."""
    data = correlations.dropna(subset=["r"])
    order = sorted(data["language_a"].unique(), key=lambda language: (language != "en", language))
    base = alt.Chart().encode(x=alt.X("language_a:N", title=None, sort=order, axis=alt.Axis(labelAngle=0)),
                              y=alt.Y("language_b:N", title=None, sort=order))
    heat = base.mark_rect().encode(color=alt.Color("r:Q", scale=alt.Scale(domain=[-1, 1], scheme="redblue"),
                                                   title="r"), tooltip=["model", "language_a", "language_b",
                                                                        alt.Tooltip("r:Q", format=".2f"),
                                                                        "n_concerns:Q"])
    text = base.mark_text(fontSize=9).encode(text=alt.Text("r:Q", format=".2f"))
    return alt.layer(heat, text, data=data).properties(width=220, height=220).facet(
        column=alt.Column("model:N", title=None), title=title)


def pass_drops(cells: pd.DataFrame, floor: pd.DataFrame,
               title: str = "Pass drop (English − language) per model, against the rewording floor") -> alt.LayerChart:
    """Each model × language pass drop as a dot (filled where reliable), with a band from −floor to
    +floor per model: a drop inside the band is no larger than rewording English produces."""
    data = cells.assign(marker=cells["reliable"].map({True: "reliable", False: "not reliable"}))
    y = alt.Y("model:N", title=None)
    layers = []
    if len(floor):
        band = model_floors(floor).rename("floor").reset_index()
        band["low"], band["high"] = -band["floor"], band["floor"]
        layers.append(alt.Chart(band).mark_bar(opacity=0.2, color="gray", size=22).encode(
            y=y, x=alt.X("low:Q"), x2="high:Q", tooltip=["model", alt.Tooltip("floor:Q", format=".0%")]))
    layers.append(alt.Chart(data).mark_point(size=70).encode(
        y=y, x=alt.X("pass_drop:Q", title="pass rate in English − in the language", axis=alt.Axis(format="%")),
        color=alt.Color("language:N"), shape=alt.Shape("marker:N", title=None),
        fill=alt.condition(alt.datum.reliable, alt.Color("language:N"), alt.value("white")),
        tooltip=["model", "language", alt.Tooltip("pass_drop:Q", format=".0%"), "n:Q", alt.Tooltip("q:Q", format=".3f")]))
    layers.append(_zero_rule())
    return alt.layer(*layers).properties(width=420, height=40 * max(1, data["model"].nunique()), title=title)


VERDICT_COLOURS = {verdict.REAL: "#d95f02", verdict.BEYOND_TYPICAL: "#e6ab02", verdict.UNCLEAR: "#7570b3",
                   verdict.NOISE: "#1b9e77", verdict.BOUNDARY: "#a6761d", verdict.NO_FLOOR: "#999999"}
EVIDENCE_COLOURS = {verdict.RELIABLE: "#d95f02", verdict.LOW_POWER: "#7570b3", verdict.NOT_RELIABLE: "#66a61e",
                    verdict.WITHIN_FLOOR: "#1b9e77"}


def language_verdicts(languages: pd.DataFrame, title: str = "Each language's drop against the models' noise floors"
                      ) -> alt.LayerChart:
    """Each language's drop with the interval its verdict reads, coloured by the verdict; the light band
    is ± the largest model floor, the dashed lines ± the typical (median) floor: an interval wholly
    outside the band is a real shift, wholly inside it within noise."""
    data = languages.assign(label=languages["language"].map(language_label))
    y = alt.Y("label:N", sort=list(data.sort_values("drop", ascending=False)["label"]), title=None)
    colour = alt.Color("verdict:N", title="verdict", scale=alt.Scale(
        domain=[v for v in VERDICT_COLOURS if v in set(data["verdict"])] or list(VERDICT_COLOURS),
        range=[c for v, c in VERDICT_COLOURS.items() if v in set(data["verdict"])] or list(VERDICT_COLOURS.values())))
    largest, typical = float(data["largest_floor"].iloc[0]), float(data["typical_floor"].iloc[0])
    layers = []
    if np.isfinite(largest):
        layers.append(alt.Chart(pd.DataFrame({"lo": [-largest], "hi": [largest]})).mark_rect(
            color="lightgray", opacity=0.6).encode(x="lo:Q", x2="hi:Q"))
        layers.extend(_zero_rule(value=side * typical) for side in (-1, 1))
    layers.append(alt.Chart(data).mark_rule(strokeWidth=3).encode(
        y=y, x=alt.X("low:Q", title="drop (English − language), 95% interval"), x2="high:Q", color=colour))
    layers.append(alt.Chart(data).mark_point(filled=True, size=70).encode(
        y=y, x="drop:Q", color=colour,
        tooltip=["label", "verdict", "basis", alt.Tooltip("drop:Q", format=".4f"), alt.Tooltip("low:Q", format=".4f"),
                 alt.Tooltip("high:Q", format=".4f")]))
    layers.append(alt.Chart(pd.DataFrame({"v": [0.0]})).mark_rule(color="black").encode(x="v:Q"))
    return alt.layer(*layers).properties(width=420, height=28 * len(data) + 20, title=title)


def cell_evidence(cells: pd.DataFrame, title: str = "Drop per model and language: the evidence per model"
                  ) -> alt.LayerChart:
    """Each model × language drop with its interval over items, coloured by what the cell shows
    (`analyses.verdict.cell_evidence`); the grey band is the model's noise floor (±floor)."""
    data = cells.assign(row=cells["language"] + " · " + cells["model"])
    order = list(data.sort_values(["language", "model"])["row"])
    y = alt.Y("row:N", sort=order, title=None)
    shown = [e for e in EVIDENCE_COLOURS if e in set(data["evidence"])] or list(EVIDENCE_COLOURS)
    colour = alt.Color("evidence:N", title="this model's cell", scale=alt.Scale(
        domain=shown, range=[EVIDENCE_COLOURS[e] for e in shown]))
    band = alt.Chart(data.assign(lo=-data["floor"], hi=data["floor"])).mark_bar(color="lightgray", size=14).encode(
        y=y, x="lo:Q", x2="hi:Q")
    rules = alt.Chart(data).mark_rule(strokeWidth=2).encode(y=y, x=alt.X("low:Q", title="drop (English − language)"),
                                                            x2="high:Q", color=colour)
    points = alt.Chart(data).mark_point(filled=True, size=60).encode(
        y=y, x="drop:Q", color=colour, tooltip=["model", "language", "evidence", alt.Tooltip("drop:Q", format=".3f"),
                                                alt.Tooltip("q:Q", format=".3f"), alt.Tooltip("power:Q", format=".0%")])
    return (band + rules + points + _zero_rule()).properties(width=420, height=18 * len(data) + 20, title=title)


def language_curves(curves: pd.DataFrame, summary: pd.DataFrame,
                    title: str = "Detection at each language's own scatter") -> alt.LayerChart:
    """Per language, the share of its cells called reliable against the injected drop δ, with a dot
    at the language's observed |drop| (median over models) and its power there as chapter 22 computes
    it (each cell at its own drop, so the dot need not lie on the curve)."""
    colour = alt.Color("language:N", title="language")
    lines = alt.Chart(curves).mark_line(point=True).encode(
        x=alt.X("delta:Q", title="injected drop δ (soft score)"),
        y=alt.Y("detected:Q", title="share of the language's cells called reliable", scale=alt.Scale(domain=[0, 1])),
        color=colour, tooltip=["language", alt.Tooltip("delta:Q", format=".3f"), alt.Tooltip("detected:Q", format=".2f")])
    dots = alt.Chart(summary.dropna(subset=["power_observed"])).mark_point(size=120, shape="diamond", filled=True).encode(
        x="observed:Q", y="power_observed:Q", color=colour,
        tooltip=["language", alt.Tooltip("observed:Q", format=".3f"), alt.Tooltip("power_observed:Q", format=".0%")])
    level = alt.Chart(pd.DataFrame({"v": [0.8]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="v:Q")
    return alt.layer(lines, dots, level).properties(width=440, height=260, title=alt.TitleParams(
        title, subtitle=["diamond: power at the observed drop, each cell tested at its own drop (chapter 22's power)",
                         "dashed: 80% power"]))


def metric_boxes(data: pd.DataFrame, value: str, *, box: str, row: str, title: str, x_title: str,
                 row_order: list[str] | None = None) -> alt.FacetChart:
    """Box plots of `value` (Tukey whiskers), one box per `box` group in each `row` panel: the
    per-template distribution, not only its mean."""
    boxes = box_summary(data.dropna(subset=[value]), value, [row, box])
    boxes[box] = boxes[box].astype(str)
    base = alt.Chart().encode(y=alt.Y(f"{box}:N", title=None), color=alt.Color(f"{box}:N", title=None, legend=None))
    whiskers = base.mark_rule().encode(x=alt.X("low:Q", scale=alt.Scale(zero=False), title=x_title), x2="high:Q")
    bar = base.mark_bar(size=12).encode(x="q1:Q", x2="q3:Q", tooltip=[row, box, "n:Q",
                                                                       alt.Tooltip("median:Q", format=".3f")])
    median = base.mark_tick(color="black", size=12).encode(x="median:Q")
    return alt.layer(whiskers, bar, median, data=boxes).properties(width=420).facet(
        row=alt.Row(f"{row}:N", title=None, sort=row_order, header=alt.Header(labelAngle=0, labelAlign="left")),
        title=title)
