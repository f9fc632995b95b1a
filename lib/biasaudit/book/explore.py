"""Charts a reader can explore in the page, with no network: hover a mark to read the item behind it.

A chart is shown as one HTML block holding three things: a line saying what to hover or pick, the
chart drawn as static SVG by vl-convert (what a reader sees where scripts do not run, and what the
`-W -n` build and the tests read), and the chart's Vega-Lite spec as JSON. `explore.js`, written
once per build into `_static` by `biasaudit.book.sphinx_offline` from vl-convert's bundled Vega,
Vega-Lite and vega-embed (no CDN), swaps each static chart for the live one on pages that hold one.

Size: a chart carries its data inline, at most `INLINE_ROWS` rows; beyond that a seeded sample is
drawn and the line above the chart says so (the tables on the page keep every row).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
import vl_convert

from biasaudit.analyses.scores import item_scores, paired_with_english
from biasaudit.book import widths
from biasaudit.book.fonts import FAMILIES
from biasaudit.data.languages import language_label

# The class of the block `explore.js` looks for.
CLASS = "ba-explore"
# Most rows of data one chart carries inline: about 0.5 MB of page with two sentences a row.
INLINE_ROWS = 1500
# Items listed per cell under an explorable heatmap (the cells' most moved).
ITEMS_PER_CELL = 8
# Text is drawn in the book's own fonts (fonts.css declares those this build needs), then the system's.
FONT = ", ".join([*(f'"{family}"' for family in FAMILIES), "sans-serif"])
# The Vega-Lite that altair writes, which the bundle must carry (vl-convert names versions major.minor).
VEGA_LITE = ".".join(alt.SCHEMA_VERSION.split(".")[:2])
# Run by the bundle on every page that includes it: each block's static chart is replaced by the
# live one; a chart that fails to load leaves the static one and says why in the console. Vega lays its
# text out with the fonts it finds, so the charts wait for the page's own fonts: laid out with a fallback
# font, a chart would be drawn wider than the column it was sized for.
SNIPPET = """
document.fonts.ready.then(() => {
  for (const block of document.querySelectorAll("div.%(cls)s")) {
    const spec = JSON.parse(block.querySelector("script.%(cls)s-spec").textContent);
    const target = document.createElement("div");
    target.className = "%(cls)s-live";
    vegaEmbed(target, spec, {renderer: "svg", actions: false}).then(() => {
      block.querySelector("div.%(cls)s-static").replaceWith(target);
      block.dataset.live = "yes";
    }).catch((error) => console.error("explorable chart:", error));
  }
});
""" % {"cls": CLASS}


def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed with `SNIPPET`, as one ES module (about 0.9 MB)."""
    return vl_convert.javascript_bundle(SNIPPET, vl_version=VEGA_LITE)


def sample_rows(data: pd.DataFrame, seed: int, limit: int = INLINE_ROWS) -> tuple[pd.DataFrame, str]:
    """`data` if it has at most `limit` rows, else a seeded sample of `limit` rows in their order; and
    the sentence that says so ("" when nothing was left out)."""
    if len(data) <= limit:
        return data, ""
    kept = data.sample(n=limit, random_state=seed).sort_index()
    return kept, f"The chart draws a random sample of {limit:,} of the {len(data):,} points (seed {seed})."


def _script_json(spec: dict) -> str:
    """JSON that can sit inside <script>: no "<", ">" or "&" (an item's text may hold "</script>")."""
    text = json.dumps(spec, ensure_ascii=False, sort_keys=True)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


@dataclass(frozen=True)
class Explorable:
    """A chart shown live where scripts run and as static SVG elsewhere; `how` says what to hover or pick."""

    chart: alt.TopLevelMixin
    how: str

    def spec(self) -> dict[str, Any]:
        spec = self.chart.to_dict()
        spec.setdefault("config", {})["font"] = FONT
        return spec

    def svg(self) -> str:
        return vl_convert.vegalite_to_svg(self.spec(), vl_version=VEGA_LITE)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        svg = self.svg()
        block = (f'<div class="{CLASS}">\n<p class="{CLASS}-how">{html.escape(self.how)}</p>\n'
                 f'<div class="{CLASS}-static">{svg}</div>\n'
                 f'<script type="application/json" class="{CLASS}-spec">{_script_json(self.spec())}</script>\n</div>')
        return {"text/html": block, "image/svg+xml": svg}


def _options(rows: pd.DataFrame) -> pd.Series:
    """"stereotyped | anti-stereotyped" per row ("" where the scores carry no texts)."""
    if "stereotyped" not in rows:
        return pd.Series("", index=rows.index)
    return rows["stereotyped"].fillna("").astype(str) + " | " + rows["anti_stereotyped"].fillna("").astype(str)


def with_texts(pairs: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """`pairs` (one row per model × changed version: base_id, item_id) with the English original's and
    the version's context and options, from the texts the scores carry (released scores carry none:
    the columns are then empty)."""
    if "context" not in scores:
        return pairs.assign(en_context="", en_options="", context="", options="")
    texts = scores.drop_duplicates("item_id").set_index("item_id")
    texts = texts.assign(options=_options(texts))
    english = texts.loc[texts["variant"] == "original"].drop_duplicates("base_id").set_index("base_id")
    return pairs.assign(
        en_context=pairs["base_id"].map(english["context"]).fillna(""),
        en_options=pairs["base_id"].map(english["options"]).fillna(""),
        context=pairs["item_id"].map(texts["context"]).fillna(""),
        options=pairs["item_id"].map(texts["options"]).fillna(""),
    )


def moved_most(pairs: pd.DataFrame, per_cell: int) -> pd.DataFrame:
    """The `per_cell` versions of each model × language whose score moved most from English (by |change|,
    ties by base_id), ranked 1, 2, ... within the cell."""
    ranked = pairs.assign(size=pairs["change"].abs()).sort_values(["model", "language", "size", "base_id"],
                                                                  ascending=[True, True, False, True], kind="stable")
    top = ranked.groupby(["model", "language"], sort=False).head(per_cell).drop(columns="size")
    return top.assign(rank=top.groupby(["model", "language"]).cumcount() + 1).reset_index(drop=True)


# The item list under an explorable heatmap: its change column, the gap between columns, the text's size
# and line height (px). Its two text columns share what is left of the reader's text column.
_CHANGE_WIDTH = 55
_SPACING = 8
_TEXT_PX = 11.0
_LINE_PX = 14
_ROW_GAP_PX = 6


def _language_names(data: pd.DataFrame) -> pd.DataFrame:
    return data.assign(language_name=data["language"].map(language_label))


def _item_tooltip() -> list:
    return [alt.Tooltip("base_id:N", title="item"), alt.Tooltip("model:N", title="model"),
            alt.Tooltip("en_context:N", title="English"), alt.Tooltip("en_options:N", title="English options"),
            alt.Tooltip("language_name:N", title="language"), alt.Tooltip("context:N", title="translated"),
            alt.Tooltip("options:N", title="translated options"),
            alt.Tooltip("soft_en:Q", title="soft score, English", format=".3f"),
            alt.Tooltip("soft:Q", title="soft score, translated", format=".3f")]


# The columns of a row of scores a chart carries; the texts go in tables of their own (`_split_texts`).
_SCORE_COLUMNS = ["model", "base_id", "item_id", "language", "language_name", "soft_en", "soft", "change", "rank"]


def _split_texts(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(scores, texts by item_id, English texts by base_id): each text is carried once, not once per
    model, and joined back in the browser (`_with_texts`); scores rounded to 4 decimals."""
    scores = rows[[c for c in _SCORE_COLUMNS if c in rows]].round(4)
    texts = rows.drop_duplicates("item_id")[["item_id", "context", "options"]]
    english = rows.drop_duplicates("base_id")[["base_id", "en_context", "en_options"]]
    return scores, texts, english


def _with_texts(chart: alt.Chart, texts: pd.DataFrame, english: pd.DataFrame) -> alt.Chart:
    """`chart` with every column of `texts` (by item_id) and of `english` (by base_id) joined in."""
    return chart.transform_lookup(
        lookup="item_id", from_=alt.LookupData(data=texts, key="item_id", fields=list(texts.columns.drop("item_id")))
    ).transform_lookup(
        lookup="base_id", from_=alt.LookupData(data=english, key="base_id", fields=list(english.columns.drop("base_id"))))


def _no_texts(texts: pd.DataFrame) -> str:
    """The sentence for scores that carry no item texts (the paper's released scores)."""
    if len(texts) and not texts["context"].astype(bool).any():
        return "These scores carry no item texts, so a mark shows its item's id and scores only."
    return ""


def wrapped(text: str, width_px: float, font_px: float = _TEXT_PX) -> list[str]:
    """`text` cut into lines no wider than `width_px` at `font_px` (the book's fonts), at spaces, and
    anywhere in a word that alone is wider (a chart cannot wrap its text; a cut word loses nothing)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        trial = f"{line} {word}" if line else word
        if widths.text_px(trial, font_px=font_px) <= width_px:
            line = trial
            continue
        if line:
            lines.append(line)
        line = ""
        for char in word:
            if line and widths.text_px(line + char, font_px=font_px) > width_px:
                lines.append(line)
                line = ""
            line += char
    return [*lines, line] if line else lines


def _axis_px(labels: pd.Series) -> float:
    """About how far a heatmap's y axis (its labels at 10 px, its title) reaches left of the cells."""
    longest = max((widths.text_px(str(label), font_px=10.0) for label in labels), default=0.0)
    return longest + 35.0


def _item_list(items: pd.DataFrame, pick: alt.Parameter, axis_px: float) -> alt.HConcatChart:
    """The items of the picked cell: the change, the English and the translated text, each text wrapped
    to lines, side by side. The list sits under the heatmap's cells, `axis_px` right of the chart's
    edge, and fits the reader's text column (`widths.TEXT_COLUMN_PX`)."""
    text_px = (widths.TEXT_COLUMN_PX - 30 - axis_px - _CHANGE_WIDTH - 2 * _SPACING) / 2  # 30: the chart's padding
    scores, texts, english = _split_texts(items)
    texts = texts.assign(lines=[wrapped(str(t), text_px - 4) for t in texts["context"]])
    english = english.assign(en_lines=[wrapped(str(t), text_px - 4) for t in english["en_context"]])
    # each line of the list starts below the one before it in its cell: as many text lines as its longer text
    height_of = scores["item_id"].map(texts.set_index("item_id")["lines"].map(len)).fillna(1).clip(lower=1)
    height_of = height_of.combine(scores["base_id"].map(english.set_index("base_id")["en_lines"].map(len)).fillna(1),
                                  max) * _LINE_PX + _ROW_GAP_PX
    scores = scores.sort_values(["model", "language", "rank"]).assign(height=height_of)
    scores = scores.assign(top=scores.groupby(["model", "language"])["height"].cumsum() - scores["height"])
    # the wrapped lines are what the list prints; a line's tooltip shows the whole text as stored
    texts = texts.assign(lines=texts["lines"].map("\n".join))
    english = english.assign(en_lines=english["en_lines"].map("\n".join))
    height = int(scores.groupby(["model", "language"])["height"].sum().max()) if len(scores) else _LINE_PX
    base = _with_texts(alt.Chart(scores), texts, english).transform_filter(pick).encode(
        y=alt.Y("top:Q", axis=None, scale=None), tooltip=_item_tooltip())
    text = {"baseline": "top", "lineBreak": "\n", "lineHeight": _LINE_PX, "fontSize": _TEXT_PX}
    change = base.mark_text(align="right", **text).encode(x=alt.value(_CHANGE_WIDTH - 5),
                                                         text=alt.Text("change:Q", format="+.3f"))
    in_english = base.mark_text(align="left", **text).encode(x=alt.value(0), text="en_lines:N")
    translated = base.mark_text(align="left", **text).encode(x=alt.value(0), text="lines:N")
    return alt.hconcat(
        change.properties(width=_CHANGE_WIDTH, height=height, title="change"),
        in_english.properties(width=text_px, height=height, title="English"),
        translated.properties(width=text_px, height=height, title="translated"),
        spacing=_SPACING)


def cell_explorer(cells: pd.DataFrame, items: pd.DataFrame, *, tooltip: list, title: str) -> Explorable:
    """Model × language heatmap of drops; hover a cell for its statistics, click it to list the items
    that moved most in it, English and translated side by side (hover a line for the whole item).

    `cells`: model, language, drop and the `tooltip` fields; `items`: `moved_most` rows with texts.
    The cell with the largest drop is picked first (and is the one the static chart lists)."""
    cells, items = _language_names(cells), _language_names(items)
    if "reliable" in cells:  # as chapter 10's static heatmap: • marks a reliable cell
        reliable = cells["reliable"].astype(bool)
        cells = cells.assign(mark=reliable.map({True: "•", False: ""}), reliable=reliable.map({True: "yes", False: "no"}))
    first = cells.loc[cells["drop"].idxmax()]
    pick = alt.selection_point(name="cell", fields=["model", "language"], toggle=False, clear=False,
                               value=[{"model": first["model"], "language": first["language"]}])
    limit = float(max(cells["drop"].abs().max(), 1e-3))
    base = alt.Chart(cells).encode(x=alt.X("language:N", title="language", axis=alt.Axis(labelAngle=0)),
                                   y=alt.Y("model:N", title="model"))
    heat = base.mark_rect(strokeWidth=3).encode(
        color=alt.Color("drop:Q", scale=alt.Scale(scheme="redblue", domain=[-limit, limit], reverse=True),
                        title="drop", legend=alt.Legend(orient="top", direction="horizontal")),
        stroke=alt.condition(pick, alt.value("black"), alt.value(None)),
        tooltip=[alt.Tooltip("model:N"), alt.Tooltip("language_name:N", title="language"), *tooltip],
    ).add_params(pick)
    text = base.mark_text(fontSize=11).encode(text=alt.Text("drop:Q", format=".3f"))
    if "mark" in cells:
        text = text + base.mark_text(dy=-11, fontSize=14).encode(text="mark:N")
    heatmap = (heat + text).properties(width=60 * cells["language"].nunique(),
                                       height=36 * cells["model"].nunique(), title=title)
    chart = alt.vconcat(heatmap, _item_list(items, pick, _axis_px(cells["model"])), spacing=18)
    how = ("Hover a cell for its numbers; click it to list below the items whose score moved most in it (change = "
           "translated − English soft score), English and translated side by side; hover a line to read the whole "
           "item.")
    return Explorable(chart, " ".join(part for part in (how, _no_texts(_split_texts(items)[1])) if part))


def carry_over_explorer(pairs: pd.DataFrame, *, seed: int, title: str) -> Explorable:
    """Each translated version's soft score against its English original's, one point per model ×
    version; pick a model and a language, hover a point to read the item in both languages.

    `pairs`: `translated_items` rows (model, base_id, language, soft_en, soft and the texts)."""
    data, sampled = sample_rows(_language_names(pairs), seed)
    points_data, texts, english = _split_texts(data)
    models = sorted(data["model"].unique())
    languages = ["all", *sorted(data["language"].unique())]
    model = alt.param(name="model", value=models[0],
                      bind=alt.binding_select(options=models, name="model "))
    language = alt.param(name="language", value="all", bind=alt.binding_select(
        options=languages, labels=["every language", *map(language_label, languages[1:])], name=" language "))
    # aria=False: no spoken description per point (hundreds of them, each as long as its tooltip)
    points = _with_texts(alt.Chart(points_data), texts, english).mark_circle(size=45, opacity=0.7, aria=False).encode(
        x=alt.X("soft_en:Q", title="soft score of the English original", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("soft:Q", title="soft score of the translation", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("language_name:N", title="language"),
        tooltip=_item_tooltip(),
    ).add_params(model, language).transform_filter(
        "datum.model == model && (language == 'all' || datum.language == language)")
    diagonal = alt.Chart(pd.DataFrame({"v": [0.0, 1.0]})).mark_line(strokeDash=[4, 4], color="gray").encode(
        x="v:Q", y="v:Q")
    chart = (diagonal + points).properties(width=420, height=420, title=title)
    how = ("Pick a model and a language; hover a point to read its item in English and in translation with both "
           "scores. On the dashed line a translation keeps its English score exactly.")
    return Explorable(chart, " ".join(part for part in (how, sampled, _no_texts(texts)) if part))


def template_examples(evaluations: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """One asked prompt and its reply per model × language × concern (the first template by base id,
    its first instance), beside the English prompt and reply of the same template and instance."""
    asked = evaluations.loc[evaluations["variant"] != "paraphrase",
                            ["model", "template_id", "base_id", "concern", "language", "verdict"]]
    first = responses.sort_values(["template_id", "instance"]).drop_duplicates(["model", "template_id"])
    rows = asked.merge(first[["model", "template_id", "instance", "prompt_text", "reply"]],
                       on=["model", "template_id"], how="inner")
    rows = rows.sort_values(["model", "language", "concern", "base_id"]).drop_duplicates(["model", "language", "concern"])
    english = asked.loc[asked["language"] == "en", ["model", "base_id", "template_id"]].merge(
        responses[["model", "template_id", "instance", "prompt_text", "reply"]], on=["model", "template_id"])
    english = english.drop_duplicates(["model", "base_id", "instance"]).rename(
        columns={"prompt_text": "en_prompt", "reply": "en_reply"}).drop(columns="template_id")
    return rows.merge(english, on=["model", "base_id", "instance"], how="left").fillna(
        {"en_prompt": "", "en_reply": ""}).reset_index(drop=True)


def pass_rate_explorer(by_concern: pd.DataFrame, examples: pd.DataFrame, *, title: str) -> Explorable:
    """Pass rate by language × concern for a picked model; hover a cell for one filled prompt and the
    model's reply in that language, and the same template's English prompt and reply."""
    data = by_concern.dropna(subset=["pass_rate"]).merge(
        examples.drop(columns=["template_id"]), on=["model", "language", "concern"], how="left")
    data = _language_names(data).fillna({"prompt_text": "", "reply": "", "en_prompt": "", "en_reply": "",
                                         "verdict": ""})
    models = sorted(data["model"].unique())
    order = sorted(data["language"].unique(), key=lambda language: (language != "en", language))
    model = alt.param(name="model", value=models[0], bind=alt.binding_select(options=models, name="model "))
    # the tooltip on both layers: the printed rate lies over the cell's centre, where a reader hovers
    base = alt.Chart(data).transform_filter("datum.model == model").encode(
        x=alt.X("language:N", title="language", sort=order, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("concern:N", title="concern"),
        tooltip=[alt.Tooltip("model:N"), alt.Tooltip("concern:N"), alt.Tooltip("language_name:N", title="language"),
                 alt.Tooltip("pass_rate:Q", title="pass rate", format=".0%"), alt.Tooltip("passed:Q"),
                 alt.Tooltip("total:Q", title="judged"), alt.Tooltip("en_prompt:N", title="English prompt"),
                 alt.Tooltip("en_reply:N", title="English reply"), alt.Tooltip("prompt_text:N", title="prompt"),
                 alt.Tooltip("reply:N", title="reply"), alt.Tooltip("verdict:N", title="verdict")])
    heat = base.mark_rect().encode(
        color=alt.Color("pass_rate:Q", scale=alt.Scale(domain=[0, 1], scheme="greens"), title="pass rate"),
    ).add_params(model)
    text = base.mark_text(fontSize=11).encode(text=alt.Text("pass_rate:Q", format=".0%"))
    chart = (heat + text).properties(width=55 * len(order), height=32 * data["concern"].nunique(), title=title)
    how = ("Pick a model; hover a cell to read one prompt it was asked in that language and its reply, beside the "
           "same template's English prompt and reply.")
    if data["pass_rate"].nunique() == 1:  # the chapter draws no rate chart then; this one is for the replies
        how += (f" Every pass rate of this run is {data['pass_rate'].iloc[0]:.0%}, so the colours say nothing here: "
                "the chart is for the prompts and replies behind its cells.")
    return Explorable(chart, how)


def translated_items(scores: pd.DataFrame, aggregate: str) -> pd.DataFrame:
    """Every model × translated version beside its English original (soft_en, soft, change), with texts."""
    return with_texts(paired_with_english(item_scores(scores, aggregate), "translation"), scores)


def moved_items(scores: pd.DataFrame, aggregate: str) -> pd.DataFrame:
    """The items an explorable heatmap lists: each cell's `ITEMS_PER_CELL` most moved, with texts."""
    return moved_most(translated_items(scores, aggregate), ITEMS_PER_CELL)
