"""Chapter 31's comparison of translators against LangBiTe's human translations: pairing checked and
mismatches listed, placeholders filled alike, success rates with Wilson intervals (checked against the
formula by hand), BLEU/chrF/cosine extremes, the P2T/T2P paired test on an exact case, the drop with
machine against human translations on scores with known soft values, and the chapter end to end on
LangBiTe's real files with translators whose output is known."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biasaudit import translate as tr
from tests.test_template_versions import rot13
from biasaudit.analyses import template_translation as tx
from biasaudit.params import ParamsError, RunParams, validate_params
from biasaudit.sources import resolve_data_dir
from tests.conftest import score_row

MIRROR = resolve_data_dir(None)
LANGBITE = MIRROR / "langbite" if MIRROR is not None else None
needs_langbite = pytest.mark.skipif(LANGBITE is None or not (LANGBITE / "prompts_es_es.csv").exists(),
                                    reason="LangBiTe's files need $BIASAUDIT_DATA_DIR (../shared/data)")


def template(base_id: str, language: str, prompt: str, concern: str = "sexism", oracle: str = "expected value") -> dict:
    return {"template_id": f"{base_id}/{language}", "base_id": base_id, "concern": concern, "oracle": oracle,
            "prompt": prompt, "language": language, "variant": "original" if language == "en" else "translation",
            "via": "human"}


def test_pairs_are_checked_and_mismatches_listed_not_dropped():
    templates = pd.DataFrame([
        template("1", "en", "Are {GENDER1} worse than {GENDER2}?"), template("1", "es", "¿Son {GENDER1} peores?"),
        template("2", "en", "Q2", concern="ageism"), template("2", "es", "P2", concern="racism"),
        template("3", "en", "Q3"), template("3", "es", "P3", oracle="same value"),
        template("4", "en", "Q4"), template("9", "es", "P9")])
    pairs, mismatches = tx.pair_references(templates, ["es"])
    assert pairs["base_id"].tolist() == ["1"] and pairs.loc[0, "reference"] == "¿Son {GENDER1} peores?"
    problems = dict(zip(mismatches["base_id"], mismatches["problem"]))
    assert set(problems) == {"2", "3", "9"}
    assert "concern differs" in problems["2"] and "'racism'" in problems["2"]
    assert "oracle differs" in problems["3"] and problems["9"] == "no English template with this id"
    counts = tx.pairing_counts(templates, pairs, mismatches, ["es"]).iloc[0]
    assert (counts["english"], counts["human"], counts["paired"], counts["mismatched"], counts["english_only"]) == \
        (4, 4, 1, 3, 1)


def test_placeholders_are_filled_by_the_same_fixed_communities():
    lists = {"GENDER": {"en": ["men", "women"], "es": ["hombres", "mujeres"]}, "AGE": {"en": ["old people"]}}
    assert tx.fill_fixed("Are {GENDER1} better than {GENDER2}?", "en", lists) == "Are men better than women?"
    assert tx.fill_fixed("¿Son {GENDER2} como {GENDER1}?", "es", lists) == "¿Son mujeres como hombres?"
    assert tx.fill_fixed("{AGE} and {AGE2}", "en", lists) == "old people and old people"
    assert tx.fill_fixed("{AGE1} y {RELIGION1}", "es", lists) == "{AGE1} y {RELIGION1}", "no list: kept as is"


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_success_rates_count_templates_and_reasons():
    made = pd.DataFrame({"via": ["mt"] * 3 + ["mt"], "language": ["es", "es", "es", "ca"]})
    failed = pd.DataFrame({"via": ["mt", "mt", "mt"], "language": ["es", "ca", "ca"], "field": ["prompt"] * 3,
                           "reason": ["placeholders changed", "placeholders changed", "empty"]})
    rates, reasons = tx.success_rates(made, failed)
    es = rates.set_index("language").loc["es"]
    assert (es["tried"], es["translated"], es["failed"]) == (4, 3, 1) and es["success_rate"] == 0.75
    assert (es["low"], es["high"]) == pytest.approx(wilson(3, 4), abs=1e-9)
    ca = rates.set_index("language").loc["ca"]
    assert (ca["tried"], ca["translated"]) == (3, 1) and (ca["low"], ca["high"]) == pytest.approx(wilson(1, 3))
    ca_reasons = reasons.loc[reasons["language"] == "ca"]
    assert ca_reasons[["reason", "templates"]].values.tolist() == [["empty", 1], ["placeholders changed", 1]]


def test_identical_text_scores_full_marks_and_disjoint_text_none():
    same = tx.sentence_scores(["¿Son los hombres peores que las mujeres?"], ["¿Son los hombres peores que las mujeres?"], "es")
    assert same.loc[0, "bleu"] == pytest.approx(100) and same.loc[0, "chrf"] == pytest.approx(100)
    other = tx.sentence_scores(["xyz qqq"], ["¿Son los hombres peores?"], "es")
    assert other.loc[0, "bleu"] < 1 and other.loc[0, "chrf"] < 5
    table = pd.DataFrame({"via": "mt", "language": "es", "hypothesis": ["a b c d", "e f g h"],
                          "reference": ["a b c d", "e f g h"], "cosine": [1.0, 0.5], "chrf": [100.0, 100.0]})
    corpus = tx.corpus_quality(table).iloc[0]
    assert corpus["bleu"] == pytest.approx(100) and corpus["cosine_mean"] == 0.75 and corpus["templates"] == 2


def test_the_order_test_is_exact_on_three_templates():
    # Differences 0.1, 0.2, 0.3 all positive: of the 2**3 sign vectors only the identity and its
    # mirror reach |mean| = 0.2, so p = 2 / 8.
    p2t = pd.DataFrame({"via": "mt", "language": "es", "base_id": ["a", "a", "b", "c", "d"],
                        "cosine": [0.8, 0.6, 0.9, 0.95, 0.5]})
    t2p = pd.DataFrame({"via": "mt", "language": "es", "base_id": ["a", "b", "c"], "cosine": [0.6, 0.7, 0.65]})
    paired, cells = tx.order_test(p2t, t2p)
    assert paired["difference"].round(12).tolist() == [0.1, 0.2, 0.3], "template a: mean of its two P2T versions"
    cell = cells.iloc[0]
    assert cell["n"] == 3 and cell["difference"] == pytest.approx(0.2) and cell["p"] == pytest.approx(0.25)
    assert cell["q"] == pytest.approx(0.25) and not cell["reliable"]


def test_the_drop_with_machine_translations_against_human_ones():
    rows = []
    for model in ("m1", "m2"):
        for base, (en, human, machine) in {"b1": (0.8, 0.6, 0.7), "b2": (0.7, 0.7, 0.4), "b3": (0.5, 0.5, 0.5)}.items():
            rows += [score_row(model, base, "en", en), score_row(model, base, "es", human)]
    scores = pd.DataFrame(rows)
    machine = pd.DataFrame([{**score_row(model, base, "es", soft, via="mt"), "item_id": f"{base}/es@mt"}
                            for model in ("m1", "m2")
                            for base, soft in {"b1": 0.7, "b2": 0.4, "b3": 0.5}.items()])
    items, cells = tx.translator_drops(scores, machine)
    one = items.loc[(items["model"] == "m1")].set_index("base_id")
    assert one.loc["b1", "drop_human"] == pytest.approx(0.2) and one.loc["b1", "drop_machine"] == pytest.approx(0.1)
    assert one["difference"].round(12).tolist() == [-0.1, 0.3, 0.0]
    cell = cells.set_index("model").loc["m1"]
    assert cell["n"] == 3 and cell["difference"] == pytest.approx(0.2 / 3)
    assert cell["drop_human"] == pytest.approx(0.2 / 3) and cell["drop_machine"] == pytest.approx(0.4 / 3)
    # Exact sign flips of (−0.1, 0.3, 0): the sums are ±0.2 and ±0.4 (each twice, for the zero); every
    # one reaches |0.2|, so p = 1: a change of one item in three is no evidence.
    assert cell["p"] == pytest.approx(1.0) and not cell["reliable"]


def test_params_check_the_chapter_keys(tmp_path):
    with pytest.raises(ParamsError, match="reference_library"):
        validate_params({"reference_library": str(tmp_path)}, "test.yml")
    with pytest.raises(ParamsError, match="template_translations"):
        validate_params({"template_translations": "machine"}, "test.yml")
    with pytest.raises(ParamsError, match="reference_languages"):
        validate_params({"reference_languages": ["es", "xx"]}, "test.yml")
    assert validate_params({"template_translations": "machine", "template_translator": "smollm2-135m"},
                           "test.yml").template_translations == "machine"


# --- the chapter on LangBiTe's real files --------------------------------------------------------


class Lookup(tr.Translator):
    """A "translator" whose output is known: a question LangBiTe translated by hand gets that human
    translation, any other text (task prefix, answer format, expected answers) its letters rotated
    with the target in front (never the source, placeholders kept); with `table` empty, every text
    loses its placeholders, so a template with one fails."""

    backend = "lookup"

    def __init__(self, table: dict[tuple[str, str], str] | None, name: str):
        super().__init__(name, cache=False, progress=False)
        self.table = table

    def _generate(self, texts, source, target):
        if self.table is None:
            return [t.replace("{", "").replace("}", "") + " ." for t in texts]
        return [self.table.get((t, target), f"[{target}] " + rot13(t)) for t in texts]

    def _outcome(self, raw, text, source, target):
        reason = tr.validate_output(raw, text, source, target)
        return tr.Outcome(None if reason else raw, raw, reason)


class Echo(tr.Paraphraser):
    """P paraphrases that differ from the source by k spaces before its last character (a rewording
    must differ from its source; to the embedder it is almost the same sentence)."""

    def __init__(self, model: str = "echo", n: int = 1, **_):
        tr.CachedTextMap.__init__(self, "echo", cache=False, progress=False)
        self.n, self.max_new_tokens = n, 100

    def _generate(self, texts, source, target):
        return ["\n".join(f"{k}. {t[:-1]}{' ' * k}{t[-1]}" for k in range(1, self.n + 1)) + tr.END_OF_REPLY
                for t in texts]


@needs_langbite
def test_the_chapter_on_langbites_files(monkeypatch, tmp_path):
    from biasaudit.chapters import template_translation as chapter
    from biasaudit.templates import read_langbite_library

    templates, _, _ = read_langbite_library(LANGBITE, ["es", "ca"])
    pairs, _ = tx.pair_references(templates, ["es", "ca"])
    table = {(row.english, row.language): row.reference for row in pairs.itertuples(index=False)}
    made_by = {"test/perfect": Lookup(table, "perfect"), "test/broken": Lookup(None, "broken")}
    monkeypatch.setattr(chapter, "make_translator", lambda name, **_: made_by[name])
    monkeypatch.setattr(chapter, "Paraphraser", Echo)
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    params = RunParams(run_name="t31", reference_library=str(LANGBITE), translators=["test/perfect", "test/broken"],
                       reference_templates=1, max_paraphrases=2, n_permutations=200)
    out = chapter.report(params)
    # One template per concern among those translated by hand into both languages.
    both = set(pairs.loc[pairs["language"] == "es", "base_id"]) & set(pairs.loc[pairs["language"] == "ca", "base_id"])
    concerns = templates.loc[(templates["language"] == "en") & templates["base_id"].isin(both), "concern"].nunique()
    assert out.values["n_sample"] == concerns
    rates = out.tables["rates"].set_index(["via", "language"])
    refused = tx.reference_check(pairs)
    sample = chapter.references(params).sample["base_id"]
    for language in ("es", "ca"):
        sampled = pairs.loc[(pairs["language"] == language) & pairs["base_id"].isin(sample)]
        accepted = len(sampled) - sampled["base_id"].isin(refused.loc[refused["language"] == language, "base_id"]).sum()
        assert rates.loc[("perfect", language), "tried"] == concerns
        assert rates.loc[("perfect", language), "translated"] == accepted, "what the rules accept of the human texts"
        assert rates.loc[("broken", language), "translated"] == 0
    assert set(out.tables["reasons"]["via"]) <= {"perfect", "broken"}
    broken = set(out.tables["reasons"].loc[out.tables["reasons"]["via"] == "broken", "reason"])
    assert "placeholders changed" in broken and broken <= {"placeholders changed", "source text returned untranslated"}
    quality = out.tables["quality"].set_index(["via", "language"])
    assert list(quality.index) == [("perfect", "es"), ("perfect", "ca")]
    assert quality["bleu"].tolist() == pytest.approx([100, 100]) and (quality["cosine_median"] > 0.999).all()
    para = out.tables["paraphrases"]
    assert set(para["P"]) == {1, 2} and (para["cosine_mean"] > 0.98).all(), "a space more is almost the same text"
    assert (para.loc[para["P"] == 2, "paraphrases"] == 2 * para.loc[para["P"] == 1, "paraphrases"].to_numpy()).all()
    orders = out.tables["orders"]
    assert set(orders["via"]) == {"perfect"}, "broken made no translation, so it has no T2P side"
    assert "translators, perfect comes closest" in out.values["best_text"]
    assert "COUNTRY" in " ".join(out.tables["refused"]["reference"]), "a Catalan placeholder without braces is found"
    assert (tmp_path / "t31" / "template_translation" / "quality.parquet").exists()


def test_without_the_library_the_chapter_says_so(monkeypatch, tmp_path):
    from biasaudit.chapters import template_translation as chapter

    monkeypatch.setattr(chapter, "find_langbite", lambda: None)
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    out = chapter.report(RunParams(run_name="none"))
    assert "not on this machine" in out.values["library_text"] and out.values["n_sample"] == 0
    assert out.table("rates") is None and out.figures["quality"] is None
    assert "chapter 01" in out.values["items_text"]


def test_machine_translations_equal_to_the_human_ones_leave_the_drop_unchanged(monkeypatch, tmp_path):
    from biasaudit import pipeline
    from biasaudit.chapters import template_translation as chapter
    from biasaudit.items import read_items
    from biasaudit.paths import project_path, run_dir
    from biasaudit.runstore import write_atomically

    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    params = RunParams(run_name="mt", models=["tiny-random"], item_banks=["tests/fixtures/ci_bank.csv"],
                       languages=["es"], n_permutations=100)
    pipeline.prepare_run(params)
    items, _, _ = pipeline.read_run_items("mt")
    pipeline.score_run("mt", items, models=["tiny-random"])
    assert "chapter 01" in chapter.machine_items(params)[2], "no machine translations yet: said, not an error"
    bank = read_items(project_path("tests/fixtures/ci_bank.csv"))
    originals = bank.loc[bank["variant"] == "original"].head(4)
    made = tr.translate_items(originals, tr.TableTranslator(bank), ["es"]).items  # the human texts, as written
    made = made.assign(via="copy", item_id=made["item_id"] + "@copy")  # labelled as a machine's would be
    write_atomically(made, run_dir("mt") / "machine_translations.parquet")
    per_item, cells, text = chapter.machine_items(params)
    assert text == "" and len(per_item) == 4 and set(per_item["translator"]) == {"copy"}
    assert np.abs(per_item["difference"]).max() < 1e-5, "the same texts score the same"
    assert cells["n"].tolist() == [4] and not cells["reliable"].any()
    assert (run_dir("mt") / "machine_items" / "scores").is_dir(), "machine versions are stored apart from the run's"


def test_chapter_30_asks_a_translators_versions_instead_of_the_human_ones(monkeypatch, tmp_path):
    from biasaudit.chapters import template_tests as chapter30

    monkeypatch.setattr(chapter30, "make_translator", lambda name, **_: Lookup({}, "rot"))
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    human = chapter30.library(RunParams(run_name="h", languages=["es", "fr"], max_templates=1))
    machine = chapter30.library(RunParams(run_name="m", languages=["es", "fr"], max_templates=1,
                                          template_translator="test/rot", template_translations="machine"))
    made = machine.templates.loc[machine.templates["language"] != "en"]
    assert set(human.templates.loc[human.templates["language"] != "en", "via"]) == {"human"}
    assert set(made["via"]) == {"rot"} and set(made["language"]) == {"es", "fr"}
    assert len(made) == len(human.templates.loc[human.templates["language"] != "en"]), "every language, every template"
    assert made["prompt"].str.startswith("[").all()
