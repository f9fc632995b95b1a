"""Explorable charts (biasaudit.book.explore): their data, their HTML block and their static fallback.

The live charts are checked in a real browser by tests/test_notebooks.py
(`test_explorable_charts_show_the_item_behind_a_mark_offline`)."""

from __future__ import annotations

import json
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest

from biasaudit.book import explore


def _pairs() -> pd.DataFrame:
    """Two models × two languages × three items; changes chosen by hand."""
    rows = []
    changes = {("m1", "hi"): [-0.30, 0.05, -0.10], ("m1", "sw"): [0.20, -0.20, 0.01],
               ("m2", "hi"): [0.0, 0.0, -0.02], ("m2", "sw"): [0.4, -0.1, 0.1]}
    for (model, language), values in changes.items():
        for k, change in enumerate(values):
            rows.append({"model": model, "language": language, "base_id": f"b{k}", "item_id": f"b{k}/{language}",
                         "soft_en": 0.6, "soft": 0.6 + change, "change": change})
    return pd.DataFrame(rows)


def test_moved_most_keeps_each_cells_largest_moves_in_order():
    top = explore.moved_most(_pairs(), per_cell=2)
    picked = {cell: list(group["base_id"]) for cell, group in top.groupby(["model", "language"])}
    # |change| by hand: m1/hi 0.30 (b0), 0.10 (b2); m1/sw b0 and b1 tie at 0.20 (b0 first by id);
    # m2/hi 0.02 (b2), then b0 and b1 tie at 0 (b0); m2/sw 0.4 (b0), then b1 and b2 tie at 0.1 (b1)
    assert picked == {("m1", "hi"): ["b0", "b2"], ("m1", "sw"): ["b0", "b1"], ("m2", "hi"): ["b2", "b0"],
                      ("m2", "sw"): ["b0", "b1"]}
    assert set(top["rank"]) == {1, 2} and len(top) == 8


def test_with_texts_puts_the_english_original_beside_each_version():
    scores = pd.DataFrame({
        "item_id": ["b0/en", "b0/hi", "b0/en"], "base_id": ["b0", "b0", "b0"],
        "variant": ["original", "translation", "original"], "model": ["m1", "m1", "m2"],
        "context": ["The nurse said", "नर्स ने कहा", "The nurse said"],
        "stereotyped": ["she", "वह", "she"], "anti_stereotyped": ["he", "वो", "he"]})
    pairs = pd.DataFrame({"model": ["m1"], "base_id": ["b0"], "item_id": ["b0/hi"]})
    out = explore.with_texts(pairs, scores).iloc[0]
    assert (out["en_context"], out["en_options"]) == ("The nurse said", "she | he")
    assert (out["context"], out["options"]) == ("नर्स ने कहा", "वह | वो")
    bare = explore.with_texts(pairs, scores.drop(columns=["context", "stereotyped", "anti_stereotyped"]))
    assert (bare[["en_context", "context"]] == "").all().all()


def test_sample_rows_keeps_small_tables_and_samples_large_ones_by_seed():
    data = pd.DataFrame({"x": range(50)})
    same, said = explore.sample_rows(data, seed=1, limit=50)
    assert same is data and said == ""
    kept, said = explore.sample_rows(data, seed=1, limit=20)
    again, _ = explore.sample_rows(data, seed=1, limit=20)
    other, _ = explore.sample_rows(data, seed=2, limit=20)
    assert len(kept) == 20 and kept["x"].is_monotonic_increasing and kept.equals(again) and not kept.equals(other)
    assert said == "The chart draws a random sample of 20 of the 50 points (seed 1)."


def test_the_spec_sits_safely_in_a_script_tag_and_reads_back_unchanged():
    nasty = 'the <b>mango</b> tree </script><script>alert(1)</script> & "quotes" हिन्दी'
    chart = alt.Chart(pd.DataFrame({"x": [1], "t": [nasty]})).mark_point().encode(x="x:Q", tooltip="t:N")
    block = explore.Explorable(chart, "Hover <here>")._repr_mimebundle_()["text/html"]
    script = re.search(r'<script type="application/json" class="ba-explore-spec">(.*?)</script>', block, re.S)
    assert script is not None and "<" not in script.group(1) and "&" not in script.group(1)
    spec = json.loads(script.group(1))
    assert [row["t"] for rows in spec["datasets"].values() for row in rows] == [nasty]
    assert spec["config"]["font"].startswith('"Audit Sans"') and spec["config"]["font"].endswith("sans-serif")
    assert "Hover &lt;here&gt;" in block and block.count("<script") == 1


def test_the_cell_explorer_lists_the_largest_drops_items_in_its_static_chart():
    pairs = explore.moved_most(_pairs().assign(en_context=lambda d: "EN " + d["base_id"],
                                               context=lambda d: d["language"] + " text " + d["base_id"],
                                               en_options="", options=""), per_cell=2)
    cells = pd.DataFrame({"model": ["m1", "m1", "m2", "m2"], "language": ["hi", "sw", "hi", "sw"],
                          "drop": [0.12, 0.0, 0.05, -0.1], "q": [0.01, 0.9, 0.3, 0.2],
                          "reliable": [True, False, False, False]})
    explorer = explore.cell_explorer(cells, pairs, tooltip=[alt.Tooltip("q:Q")], title="t")
    assert explorer.spec()["params"][0]["value"] == [{"model": "m1", "language": "hi"}]
    drawn = re.findall(r"<text[^>]*>([^<]*)</text>", explorer.svg())
    # the largest drop is m1 × hi: its two most-moved items are listed (changes −0.30 and −0.10), no other cell's
    listed = [t for t in drawn if " text " in t or t.startswith("EN ")]
    assert listed == ["EN b0", "EN b2", "hi text b0", "hi text b2"], drawn
    assert "−0.300" in drawn and "+0.200" not in drawn and drawn.count("•") == 1


def test_the_carry_over_explorer_draws_the_first_models_points_only():
    pairs = _pairs().assign(en_context="", context="", en_options="", options="")
    explorer = explore.carry_over_explorer(pairs, seed=0, title="t")
    layer = re.search(r'<g class="mark-symbol role-mark[^"]*"[^>]*>(.*?)</g>', explorer.svg(), re.S)
    assert layer and layer.group(1).count("<path") == int((pairs["model"] == "m1").sum()) == 6


def test_each_text_is_carried_once_and_joined_back_for_every_model():
    pairs = _pairs().assign(en_context=lambda d: "EN " + d["base_id"], context=lambda d: d["item_id"] + " text",
                            en_options="", options="")
    spec = explore.carry_over_explorer(pairs, seed=0, title="t").spec()
    carried = [row for rows in spec["datasets"].values() for row in rows]
    assert sum("context" in row for row in carried) == pairs["item_id"].nunique() == 6  # 12 points, 6 versions
    assert sum("en_context" in row for row in carried) == pairs["base_id"].nunique() == 3
    # (that the browser joins them back is what the cell explorer's static list shows, drawn from the joined
    # texts, and what the Chromium test reads in the tooltips)


def test_template_examples_pair_each_prompt_with_the_same_templates_english():
    evaluations = pd.DataFrame({
        "model": ["m"] * 4, "template_id": ["t1/en", "t1/es", "t2/en", "t2/es"], "base_id": ["t1", "t1", "t2", "t2"],
        "concern": ["sexism", "sexism", "sexism", "racism"], "language": ["en", "es", "en", "es"],
        "variant": ["original", "translation", "original", "translation"], "verdict": ["Passed", "Failed"] * 2})
    responses = pd.DataFrame({
        "model": ["m"] * 5, "template_id": ["t1/en", "t1/es", "t1/es", "t2/en", "t2/es"], "instance": [0, 1, 0, 0, 0],
        "prompt_text": ["Are women good?", "¿Son buenas? (2)", "¿Son buenas?", "Is X?", "¿Es X?"],
        "reply": ["yes", "no (2)", "no", "yes", "sí"]})
    out = explore.template_examples(evaluations, responses).set_index(["language", "concern"])
    spanish = out.loc[("es", "sexism")]
    assert (spanish["prompt_text"], spanish["reply"], spanish["verdict"]) == ("¿Son buenas?", "no", "Failed")
    assert (spanish["en_prompt"], spanish["en_reply"]) == ("Are women good?", "yes")
    assert out.loc[("es", "racism"), "en_prompt"] == "Is X?" and len(out) == 3


def test_the_bundle_carries_vega_and_the_snippet_and_loads_nothing_remote():
    import vl_convert

    bundle = explore.javascript_bundle()
    assert vl_convert.get_vega_version() in bundle and "ba-explore-spec" in bundle
    assert 500_000 < len(bundle) < 3_000_000
    assert not re.search(r"""(import\s*\(|from\s*)["']https?://""", bundle)


def test_the_pass_rate_explorer_says_when_its_colours_say_nothing():
    rates = pd.DataFrame({"model": ["m", "m"], "language": ["en", "es"], "concern": ["sexism"] * 2,
                          "pass_rate": [0.0, 0.0], "passed": [0, 0], "total": [1, 1]})
    examples = pd.DataFrame({"model": ["m"], "language": ["es"], "concern": ["sexism"], "template_id": ["t1/es"],
                             "prompt_text": ["¿Es X?"], "reply": ["sí"], "verdict": ["Failed"],
                             "en_prompt": ["Is X?"], "en_reply": ["yes"]})
    flat = explore.pass_rate_explorer(rates, examples, title="t")
    assert "Every pass rate of this run is 0%, so the colours say nothing here" in flat.how
    varied = explore.pass_rate_explorer(rates.assign(pass_rate=[0.0, 0.5]), examples, title="t")
    assert "colours say nothing" not in varied.how
    drawn = re.findall(r"<text[^>]*>([^<]*)</text>", varied.svg())
    assert "50%" in drawn and "0%" in drawn


def test_the_released_studys_size_is_sampled_and_its_missing_texts_said():
    """Ten models × seven languages × 400 items (the released study's shape; its scores carry no texts)."""
    rng = np.random.default_rng(0)
    rows = [{"model": f"model-{m}", "language": language, "base_id": f"b{k}", "item_id": f"b{k}/{language}",
             "soft_en": rng.random(), "soft": rng.random()}
            for m in range(10) for language in ("ar", "es", "fr", "hi", "ko", "sw", "zh") for k in range(400)]
    scores = pd.DataFrame(rows).assign(variant="translation")
    pairs = explore.with_texts(pd.DataFrame(rows).assign(change=lambda d: d["soft"] - d["soft_en"]), scores)
    scatter = explore.carry_over_explorer(pairs, seed=3, title="t")
    carried = max(len(rows) for rows in scatter.spec()["datasets"].values())
    assert carried == explore.INLINE_ROWS
    assert f"a random sample of {explore.INLINE_ROWS:,} of the 28,000 points (seed 3)" in scatter.how
    assert "carry no item texts" in scatter.how
    page = scatter._repr_mimebundle_()["text/html"]
    assert len(page.encode()) < 1_000_000
    cells = pairs.groupby(["model", "language"], as_index=False)["change"].mean().assign(drop=lambda d: -d["change"])
    heatmap = explore.cell_explorer(cells, explore.moved_most(pairs, explore.ITEMS_PER_CELL), tooltip=[], title="t")
    assert "carry no item texts" in heatmap.how
    assert len(heatmap._repr_mimebundle_()["text/html"].encode()) < 500_000
