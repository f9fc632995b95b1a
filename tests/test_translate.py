"""Translation and rewording: the cache, the seq2seq path on tiny random models, cleaning rules,
item translation, round trips and paraphrasing (biasaudit.translate)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import sentencepiece as spm
import torch
from biasaudit import translate as tr
from biasaudit.data import languages
from biasaudit.data.item_table import (
    ITEM_COLUMNS,
    is_collapsed,
    read_items,
    validate_items,
)
from transformers import (
    M2M100Config,
    M2M100ForConditionalGeneration,
    M2M100Tokenizer,
    MarianConfig,
    MarianMTModel,
    MarianTokenizer,
)

FIXTURES = Path(__file__).parent / "fixtures" / "translate"


# ---------------------------------------------------------------------------------------------
# A fake translator: deterministic, counts its calls, can be told to break
# ---------------------------------------------------------------------------------------------


class FakeTranslator(tr.Translator):
    """Prefixes the target code ("[de] text"); back into English it strips the prefix."""

    backend = "fake"

    def __init__(self, *, fail_on: set[str] | None = None, break_after: int | None = None,
                 rewrite: dict[str, str] | None = None, **options):
        super().__init__("fake/tiny-mt", **options)
        self.fail_on = fail_on or set()
        self.break_after = break_after
        self.rewrite = rewrite or {}
        self.batches: list[list[str]] = []

    def _generate(self, texts, source, target):
        if self.break_after is not None and len(self.batches) >= self.break_after:
            raise KeyboardInterrupt("simulated interruption")
        self.batches.append(list(texts))
        out = []
        for text in texts:
            if text in self.fail_on:
                out.append("")
            elif target == "en" and text.startswith("["):
                restored = text.split("] ", 1)[1]
                out.append(self.rewrite.get(restored, restored))
            else:
                out.append(f"[{target}] {self.rewrite.get(text, text)}")
        return out

    def _outcome(self, raw, text, source, target):
        return tr.Outcome(raw or None, raw, "" if raw else "empty")


def test_repeated_strings_are_translated_once_in_batches(tmp_path):
    translator = FakeTranslator(batch_size=2, cache=tmp_path / "cache.sqlite", progress=False)
    texts = ["a b", "c", "a b", "", "d e f", "c", "g"]
    out = translator.translate(texts, "en", "de")
    assert out == ["[de] a b", "[de] c", "[de] a b", "", "[de] d e f", "[de] c", "[de] g"]
    assert translator.calls == 4
    assert [len(b) for b in translator.batches] == [2, 2]


def test_cache_makes_a_rerun_free_and_is_keyed_by_languages_and_model(tmp_path):
    cache = tmp_path / "cache.sqlite"
    first = FakeTranslator(cache=cache, progress=False)
    first.translate(["x y", "z"], "en", "de")
    again = FakeTranslator(cache=cache, progress=False)
    table = again.translate_detailed(["x y", "z"], "en", "de")
    assert again.calls == 0 and table["cached"].all()
    assert table["translation"].tolist() == ["[de] x y", "[de] z"]
    again.translate(["x y"], "en", "fi")  # another target language: not in the cache
    assert again.calls == 1
    other = FakeTranslator(cache=cache, progress=False)
    other.name = "fake/another-model"
    other.translate(["x y"], "en", "de")
    assert other.calls == 1


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path):
    cache = tmp_path / "cache.sqlite"
    texts = [f"text {i}" for i in range(7)]
    broken = FakeTranslator(batch_size=2, break_after=2, cache=cache, progress=False)
    with pytest.raises(KeyboardInterrupt):
        broken.translate(texts, "en", "de")
    assert len(tr.KeyValueStore(cache)) == 4  # two finished batches were written
    resumed = FakeTranslator(batch_size=2, cache=cache, progress=False)
    assert resumed.translate(texts, "en", "de") == [f"[de] text {i}" for i in range(7)]
    assert resumed.calls == 3


def test_failed_outputs_are_none_with_a_reason_and_cleaning_reruns_on_cached_raw(tmp_path):
    translator = FakeTranslator(fail_on={"bad"}, cache=tmp_path / "c.sqlite", progress=False)
    table = translator.translate_detailed(["good", "bad"], "en", "de")
    assert table["translation"].tolist() == ["[de] good", None]
    assert table["reason"].tolist() == ["", "empty"]


# ---------------------------------------------------------------------------------------------
# The seq2seq path on tiny random Marian and M2M100 models with sentencepiece trained on the fly
# ---------------------------------------------------------------------------------------------

SEQ2SEQ_CORPUS = [
    "The nurse said that she was tired.", "The engineer said that he would fix the bug himself.",
    "Die Krankenschwester sagte, dass sie müde war.", "Der Ingenieur sagte, er würde den Fehler beheben.",
    "My grandmother cannot use a phone.", "Meine Oma kann kein Telefon benutzen.",
    "La enfermera dijo que estaba cansada.", "Hyvää huomenta, sanoi insinööri.",
] * 25


def _train_spm(folder: Path) -> Path:
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(SEQ2SEQ_CORPUS), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(folder / "spm"), vocab_size=60,
                                   model_type="unigram", character_coverage=1.0, pad_id=-1, bos_id=-1, eos_id=-1,
                                   unk_id=0, minloglevel=2)
    return folder / "spm.model"


def _spm_vocab(model: Path, extra: list[str]) -> dict[str, int]:
    processor = spm.SentencePieceProcessor(model_file=str(model))
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for piece in [processor.id_to_piece(i) for i in range(processor.get_piece_size())] + extra:
        vocab.setdefault(piece, len(vocab))
    return vocab


def _small(config_class, vocab_size: int, **ids):
    return config_class(vocab_size=vocab_size, d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_position_embeddings=128, **ids)


@pytest.fixture(scope="session")
def marian_dir(tmp_path_factory):
    """A random Marian en→de model (multi-target style: its vocabulary has >>de<< and >>fi<<)."""
    folder = tmp_path_factory.mktemp("marian")
    model = _train_spm(folder)
    vocab = _spm_vocab(model, [">>de<<", ">>fi<<"])
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = MarianTokenizer(str(model), str(model), str(folder / "vocab.json"))
    torch.manual_seed(0)
    config = _small(MarianConfig, len(vocab), pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                    forced_eos_token_id=1)
    out = folder / "en-de"
    MarianMTModel(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def m2m_dir(tmp_path_factory):
    """A random M2M100 model: its tokenizer carries the 100 language tokens (__de__, ...)."""
    folder = tmp_path_factory.mktemp("m2m")
    model = _train_spm(folder)
    (folder / "vocab.json").write_text(json.dumps(_spm_vocab(model, [])), encoding="utf-8")
    tokenizer = M2M100Tokenizer(str(folder / "vocab.json"), str(model))
    torch.manual_seed(0)
    size = max(tokenizer.lang_code_to_id.values()) + 16
    config = _small(M2M100Config, size, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                    bos_token_id=tokenizer.bos_token_id, decoder_start_token_id=tokenizer.eos_token_id)
    out = folder / "m2m"
    M2M100ForConditionalGeneration(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_seq2seq_translates_in_batches_caches_and_resumes(marian_dir, tmp_path):
    cache = tmp_path / "cache.sqlite"
    texts = ["The nurse said that she was tired.", "My grandmother cannot use a phone.",
             "The nurse said that she was tired.", "Die Krankenschwester.", "The engineer said that"]
    first = tr.Seq2SeqTranslator(str(marian_dir), device="cpu", batch_size=2, max_new_tokens=12, cache=cache,
                                 progress=False)
    table = first.translate_detailed(texts, "en", "de")
    assert first.calls == 4 and len(table) == 5
    assert table["raw"].str.len().gt(0).all()  # random weights, but every text got an output
    assert table.loc[0, "raw"] == table.loc[2, "raw"]
    again = tr.Seq2SeqTranslator(str(marian_dir), device="cpu", batch_size=2, max_new_tokens=12, cache=cache,
                                 progress=False)
    assert again.translate(texts, "en", "de") == table["translation"].tolist()
    assert again.calls == 0 and again._loaded == {}  # served from the cache: the model is never loaded

    more = texts + ["Meine Oma kann kein Telefon benutzen.", "Hyvää huomenta."]
    broken = tr.Seq2SeqTranslator(str(marian_dir), device="cpu", batch_size=1, max_new_tokens=12, cache=cache,
                                  progress=False)
    real = broken._generate
    seen = []

    def interrupted(batch, source, target):
        if seen:
            raise KeyboardInterrupt("simulated interruption")
        seen.append(batch)
        return real(batch, source, target)

    broken._generate = interrupted
    with pytest.raises(KeyboardInterrupt):
        broken.translate(more, "en", "de")
    resumed = tr.Seq2SeqTranslator(str(marian_dir), device="cpu", batch_size=1, max_new_tokens=12, cache=cache,
                                   progress=False)
    resumed.translate(more, "en", "de")
    assert resumed.calls == 1  # one of the two new texts was finished before the interruption


def test_marian_pattern_and_target_token(marian_dir, tmp_path):
    pattern = str(marian_dir.parent / "{source}-{target}")
    translator = tr.Seq2SeqTranslator(pattern, device="cpu", max_new_tokens=6, cache=False, progress=False)
    assert translator.model_name("en", "de") == str(marian_dir)
    network, tokenizer, family = translator._load("en", "de")
    assert family == "marian"
    seen = {}
    original = network.generate

    def spy(**kwargs):
        seen["ids"] = kwargs["input_ids"]
        return original(**kwargs)

    network.generate = spy
    translator.translate(["The nurse said that she was tired."], "en", "de")
    assert seen["ids"][0, 0].item() == tokenizer.get_vocab()[">>de<<"]


def test_m2m100_forces_the_target_language_token(m2m_dir):
    translator = tr.Seq2SeqTranslator(str(m2m_dir), device="cpu", max_new_tokens=6, cache=False, progress=False)
    network, tokenizer, family = translator._load("en", "fi")
    assert family == "m2m100"
    seen = {}
    original = network.generate

    def spy(**kwargs):
        seen["out"] = original(**kwargs)
        seen["src"] = kwargs["input_ids"]
        return seen["out"]

    network.generate = spy
    translator.translate(["The nurse said that she was tired."], "en", "fi")
    assert seen["out"][0, 1].item() == tokenizer.get_lang_id("fi")
    assert seen["src"][0, 0].item() == tokenizer.get_lang_id("en")


def test_language_codes_per_family():
    translator = tr.Seq2SeqTranslator("facebook/nllb-200-distilled-600M", cache=False,
                                      language_codes={"sw": "swh_Latn"})
    assert translator.code("nllb", "zh") == "zho_Hans"
    assert translator.code("nllb", "ar") == "arb_Arab"
    assert translator.code("nllb", "ja") == "jpn_Jpan"
    assert translator.code("m2m100", "ko") == "ko"
    with pytest.raises(KeyError, match="no NLLB-200 code"):
        translator.code("nllb", "xx")
    assert set(languages.NLLB_CODES) >= {"en", "es", "fr", "zh", "ar", "ko", "sw", "hi", "de", "fi", "ja"}


def test_make_translator_picks_the_backend(marian_dir):
    bank = read_items()
    assert isinstance(tr.make_translator("human", items=bank), tr.TableTranslator)
    assert isinstance(tr.make_translator("smollm2-135m", cache=False), tr.ChatTranslator)
    assert isinstance(tr.make_translator(str(marian_dir), cache=False), tr.Seq2SeqTranslator)
    with pytest.raises(ValueError, match="kind"):
        tr.make_translator("x", kind="rule-based")


# ---------------------------------------------------------------------------------------------
# Cleaning rules: real-looking replies
# ---------------------------------------------------------------------------------------------

CONTEXT = "After the long meeting, the engineer said that"
CONTINUATION = "he would fix the bug himself."
ES = "Tras la larga reunión, el ingeniero dijo que"

CLEANING_CASES = [
    # (reply, text, target, expected translation, or "!" + a piece of the failure reason)
    (ES, CONTEXT, "es", ES),
    (f"Here is the translation:\n\n\"{ES}\"", CONTEXT, "es", ES),
    (f"Sure! Here's the Spanish translation:\n{ES}", CONTEXT, "es", ES),
    (f"Here is the Spanish translation: {ES}", CONTEXT, "es", ES),
    (f"Translation: {ES}", CONTEXT, "es", ES),
    (f"**Spanish:** {ES}", CONTEXT, "es", ES),
    (f"English: {CONTEXT}\nSpanish: {ES}", CONTEXT, "es", ES),
    (f"{ES}\n\nNote: \"ingeniero\" is the masculine form; the feminine is \"ingeniera\".", CONTEXT, "es", ES),
    (f"\"{ES}\" (Note: I kept the sentence unfinished.)", CONTEXT, "es", ES),
    (f"«{ES}»", CONTEXT, "es", ES),
    (f"```\n{ES}\n```", CONTEXT, "es", ES),
    (f"<text>\n{ES}\n</text>", CONTEXT, "es", ES),
    (f"{ES}<|im_end|>", CONTEXT, "es", ES),
    (f"{ES}\n\nThis is a Spanish translation of the English sentence.", CONTEXT, "es", ES),
    (f"{ES}\n\nTranslate it as it is: no quotes, no label, no notes.", CONTEXT, "es", ES),
    (f"{ES}\n\nI made a mistake in the sentence. The word for \"bug\" is \"error\".", CONTEXT, "es", ES),
    ("Je suis désolé, je suis désolé.\n\nJe suis désolé, je suis désolé.", "found it very confusing.", "fr",
     "Je suis désolé, je suis désolé."),
    ("他会亲自修复这个漏洞。", CONTINUATION, "zh", "他会亲自修复这个漏洞。"),
    ("¿Es ella la enfermera?", "Is she the nurse?", "es", "¿Es ella la enfermera?"),
    ("Tras la reunión, {PERSON} dijo que", "After the meeting, {PERSON} said that", "es",
     "Tras la reunión, {PERSON} dijo que"),
    # failures
    ("", CONTEXT, "es", "!empty"),
    ("Here is the translation:", CONTEXT, "es", "!empty"),
    (f"{ES}\n\nDespués de la larga reunión, el ingeniero comentó que", CONTEXT, "es", "!several lines"),
    ("Eligojo: He debe fixar el bug himself.\n\nEligio: No, no, no.", CONTINUATION, "es", "!several lines"),
    ("I'm sorry, but I can't help with that request.", CONTEXT, "es", "!refusal"),
    (CONTEXT, CONTEXT, "es", "!returned untranslated"),
    (f"The translation of \"{CONTEXT}\" in Spanish is \"{ES}\".", CONTEXT, "es", "!returned untranslated"),
    ("Tras la reunión, {PERSONA} dijo que", "After the meeting, {PERSON} said that", "es", "!placeholders"),
    ("Tras la reunión, dijo que", "After the meeting, {PERSON} said that", "es", "!placeholders"),
    ("Ella es la enfermera.", "Is she the nurse?", "es", "!question"),
    ("He will repair the error alone.", CONTINUATION, "zh", "!not written in the Han script"),
    ("彼はバグを自分で直すだろう。", CONTINUATION, "es", "!not written in the Latin script"),
    ("El engineer es el que es el que es el que es el que es el que", CONTEXT, "es", "!decoding loop"),
    ("El ingeniero " + "dijo muchas cosas sobre el trabajo y la reunión y el proyecto " * 6, CONTEXT, "es",
     "!too long"),
]


@pytest.mark.parametrize("reply, text, target, expected", CLEANING_CASES)
def test_cleaning_rules(reply, text, target, expected):
    outcome = tr.clean_reply(reply, text, "en", target)
    if expected.startswith("!"):
        assert outcome.output is None
        assert expected[1:] in outcome.reason, outcome.reason
    else:
        assert outcome.output == expected and outcome.reason == ""


def test_a_reply_cut_off_by_the_token_limit_fails_unless_only_notes_were_cut():
    cut = tr.clean_reply("Tras la larga reunión, el ingeniero", CONTEXT, "en", "es", finished=False)
    assert cut.output is None and "cut off" in cut.reason
    notes_cut = tr.clean_reply(f"{ES}\n\nNote: the word", CONTEXT, "en", "es", finished=False)
    assert notes_cut.output == ES


def test_recorded_smollm2_replies_clean_by_the_rules():
    """Replies SmolLM2-135M-Instruct gave to this project's prompt (raw, end marker included). The
    expected outcome of each was worked out by hand from the rules of `clean_reply` (the `why` of
    each record says which rule decides). Cleaning only extracts: the 19 accepted ones are in the
    right language but wrong in meaning, which is the judge's to catch (see test_judge)."""
    records = [json.loads(line) for line in (FIXTURES / "smollm2_replies.jsonl").read_text("utf-8").splitlines()]
    assert len(records) == 32 and sum(r["translation"] is not None for r in records) == 19
    for r in records:
        outcome = tr.clean_reply(r["raw"], r["text"], "en", r["target"], finished=tr.END_OF_REPLY in r["raw"])
        assert outcome.output == r["translation"], r
        assert outcome.reason.startswith(r["reason"]) and bool(outcome.reason) == bool(r["reason"]), r


@pytest.mark.parametrize("candidate, text, expected", [
    ("El profesor ganó la national math competition.", "The student who won the national math competition was",
     "national math"),
    ("Je suis désolé de la mango tree.", "the mango tree needed watering.", "mango tree"),
    ("El jar de honey en la sala.", "a jar of honey on the shelf.", ""),  # copied, but not two in a row
    ("John Smith llegó tarde.", "John Smith arrived late.", ""),  # names stay as they are
    ("el de la casa", "of the house", ""),  # short words do not count
])
def test_copied_words(candidate, text, expected):
    assert tr.copied_words(candidate, text) == expected


@pytest.mark.parametrize("text, translation, target, expected", [
    (CONTEXT, ES + ".", "es", ES),
    (CONTINUATION, "Él arreglaría el fallo.", "es", "él arreglaría el fallo."),
    ("she was tired.", "Sie war müde.", "de", "sie war müde."),
    ("engineers fix bugs.", "Ingenieure beheben Fehler.", "de", "Ingenieure beheben Fehler."),
    ("i think so.", "I think so.", "en", "I think so."),
    ("Nurses are kind.", "Las enfermeras son amables.", "es", "Las enfermeras son amables."),
    ("he was tired.", "他累了。", "zh", "他累了。"),
    ("When she heard that", "当她听说时。", "zh", "当她听说时"),
])
def test_fit_fragment(text, translation, target, expected):
    assert tr.fit_fragment(text, translation, target) == expected


def test_prompts_state_the_rules():
    system, user = tr.translation_prompt("Is she {PERSON}?", "en", "ko")
    assert user == {"role": "user", "content": "Is she {PERSON}?"}
    rules = system["content"]
    assert "into Korean" in rules and "{PERSON}" in rules and "yes/no question" in rules
    assert "exact meaning" in rules and "translation only" in rules


# ---------------------------------------------------------------------------------------------
# Items: structure, collapsed contrasts, round trips, human tables
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def originals(small_items):
    return small_items.loc[small_items["variant"] == "original"].reset_index(drop=True)


def test_translate_items_keeps_structure_flags_collapsed_and_counts_failures(originals, tmp_path):
    translator = FakeTranslator(fail_on={"use a phone."}, rewrite={"he was tired.": "she was tired."},
                                cache=tmp_path / "c.sqlite", progress=False)
    result = tr.translate_items(originals, translator, ["de", "fi"])
    assert list(result.items.columns) == ITEM_COLUMNS == ITEM_COLUMNS
    assert len(result.items) == 2 * (len(originals) - 1)
    first = result.items.set_index("item_id").loc["a/de@tiny-mt"]
    assert (first["context"], first["stereotyped"]) == ("[de] The nurse said that", "[de] she was tired.")
    assert first["variant"] == "translation" and first["via"] == "fake/tiny-mt" and first["language"] == "de"
    assert result.collapsed["item_id"].tolist() == ["a/de@tiny-mt", "a/fi@tiny-mt"]
    assert set(result.failed["item_id"]) == {"c/de@tiny-mt", "c/fi@tiny-mt"}
    assert set(result.failed["field"]) == {"stereotyped"}
    assert result.items.loc[result.items["base_id"] == "b", "context"].tolist() == ["", ""]
    summary = result.summary().set_index("language")
    assert summary.loc["de", ["made", "failed", "collapsed"]].tolist() == [3, 1, 1]
    validate_items(pd.concat([originals, result.items]))


def test_round_trip_rewordings_and_unchanged_share(originals, tmp_path):
    translator = FakeTranslator(rewrite={"The nurse said that": "The nurse told us that"},
                                cache=tmp_path / "c.sqlite", progress=False)
    result = tr.round_trip(originals, translator, ["de", "ja"])
    assert set(result.items["item_id"]) == {f"{b}/en~{p}" for b in originals["base_id"] for p in ("de", "ja")}
    assert set(result.items["via"]) == {"de", "ja"}
    assert (result.items["variant"] == "rewording").all() and (result.items["language"] == "en").all()
    shares = result.unchanged.set_index("pivot")
    fields = 4 * len(originals)  # one of them (item a's context) comes back reworded
    assert shares.loc["de", "share_fields_unchanged"] == pytest.approx((fields - 1) / fields)
    assert shares.loc["de", "share_items_unchanged"] == pytest.approx((len(originals) - 1) / len(originals))
    assert set(result.pivots["language"]) == {"de", "ja"}


def test_human_table_translator_returns_the_bank_as_written():
    bank = read_items()
    human = tr.TableTranslator(bank)
    result = tr.translate_items(bank, human, ["es", "ko"])
    assert len(result.items) == 128 and result.failed.empty and result.collapsed.empty
    assert set(result.items["via"]) == {"human"}
    original = bank.set_index("item_id").loc["w-gender-001/en"]
    assert human.translate([original["context"], "not in the bank"], "en", "zh") == ["漫长的会议结束后，工程师说", None]


# ---------------------------------------------------------------------------------------------
# Paraphrasing
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("The nurse said that she was tired.", "singular"),
    ("The nurses said that they were tired.", "plural"),
    ("{PERSON} is good at math.", "singular"),
    ("People from {PLACE} are good at math.", "plural"),
    ("Nothing here.", "unknown"),
])
def test_grammatical_number(text, expected):
    assert tr.grammatical_number(text) == expected


def test_paraphrase_prompt_states_number_fragment_and_count():
    system, user = tr.paraphrase_prompt("After the meeting, the nurse said that", "en", 3)
    assert user["content"] == "After the meeting, the nurse said that"
    assert "3 different rewordings" in system["content"] and "singular" in system["content"]
    assert "unfinished" in system["content"]
    system, _ = tr.paraphrase_prompt("Las enfermeras son amables.", "es", 2)
    assert "singular" not in system["content"] and "unfinished" not in system["content"]


@pytest.mark.parametrize("reply, n, expected, reason", [
    ("1. The nurse told me she was tired.\n2. She was tired, the nurse said.\n3. \"The nurse said she felt tired.\"",
     3, ["The nurse told me she was tired.", "She was tired, the nurse said.", "The nurse said she felt tired."], ""),
    ("Here are three rewordings:\n1) The nurse told me she was tired.\n2) The nurse told me she was tired.\n"
     "3) The nurse said that she was tired.", 3, ["The nurse told me she was tired."], "same as"),
    ("1. **The nurse told me she was tired.**\n2. The nurse mentioned that she was worn out.", 2,
     ["The nurse told me she was tired.", "The nurse mentioned that she was worn out."], ""),
    ("The nurse told me she was tired.", 2, [], "0 of 2"),
    ("The nurse told me she was tired.", 2, [], "no numbered line in the reply"),  # the cause, beside the count
])
def test_parse_paraphrases(reply, n, expected, reason):
    found, why = tr.parse_paraphrases(reply, "The nurse said that she was tired.", "en", n)
    assert found == expected
    assert reason in why if reason else why == ""


def test_parse_paraphrases_keeps_placeholders_and_drops_a_cut_off_last_line():
    found, why = tr.parse_paraphrases("1. {X1} repaired the bug {X2}\n2. {X1} fixed it\n3. {X1} would repair",
                                      "{X1} would fix the bug {X2}", "en", 3, finished=False)
    assert found == ["{X1} repaired the bug {X2}"] and "placeholders" in why and "cut off" in why


@pytest.mark.parametrize("first, second, language, template", [
    ("he would fix the bug himself.", "she would fix the bug herself.", "en", "{X1} would fix the bug {X2}"),
    ("an Asian boy from the suburbs.", "a white boy from the suburbs.", "en", "{X1} boy from the suburbs."),
    ("他会亲自修复这个漏洞。", "她会亲自修复这个漏洞。", "zh", "{X1}会亲自修复这个漏洞。"),
])
def test_contrast_template_round_trips(first, second, language, template):
    made, fill_a, fill_b = tr.contrast_template(first, second, language)
    assert made == template
    assert tr.fill_template(made, fill_a, language) == first
    assert tr.fill_template(made, fill_b, language) == second


class FakeParaphraser(tr.Paraphraser):
    """Canned numbered lists: rewording k puts "(k)" after the first word; templates keep markers."""

    def __init__(self, n=2, broken: set[str] | None = None, **options):
        super().__init__("fake/para", n=n, network=object(), tokenizer=object(), **options)
        self.broken = broken or set()

    def _generate(self, texts, source, target):
        replies = []
        for text in texts:
            if text in self.broken:
                replies.append("I cannot reword this.")
                continue
            head, _, tail = text.partition(" ")
            replies.append("\n".join(f"{k}. {head} ({k}) {tail}".strip() for k in range(1, self.n + 1))
                           + tr.END_OF_REPLY)
        return replies


def test_paraphrase_items_rewords_both_continuations_the_same_way(originals, tmp_path):
    paraphraser = FakeParaphraser(n=2, broken={"sing."}, cache=tmp_path / "p.sqlite", progress=False)
    result = tr.paraphrase_items(originals, paraphraser)
    assert len(result.items) == 2 * (len(originals) - 1)
    assert set(result.failed["base_id"]) == {"c"} and set(result.failed["field"]) == {"third"}
    row = result.items.set_index("item_id").loc["a/en~para-p2"]
    assert row["stereotyped"] == "{X1} (2) was tired.".replace("{X1}", "she")
    assert row["anti_stereotyped"] == "he (2) was tired."
    assert row["context"] == "The (2) nurse said that" and row["via"] == "fake/para:p2"
    assert not is_collapsed(result.items).any()
    validate_items(pd.concat([originals, result.items]))


def test_both_orders_of_paraphrase_and_translation(originals, tmp_path):
    cache = tmp_path / "c.sqlite"
    paraphraser = FakeParaphraser(n=2, cache=cache, progress=False)
    translator = FakeTranslator(cache=cache, progress=False)
    first = tr.paraphrase_then_translate(originals, paraphraser, translator, ["de"])
    second = tr.translate_then_paraphrase(originals, translator, paraphraser, ["de"])
    assert len(first.items) == len(second.items) == 2 * len(originals)
    a = first.items.set_index("item_id").loc["a/de~para-p1>tiny-mt"]
    assert a["context"] == "[de] The (1) nurse said that" and a["via"] == "fake/para:p1>fake/tiny-mt"
    b = second.items.set_index("item_id").loc["a/de~tiny-mt>para-p1"]
    assert b["context"] == "[de] (1) The nurse said that" and b["via"] == "fake/tiny-mt>fake/para:p1"
    assert (first.items["variant"] == "rewording").all() and (second.items["language"] == "de").all()


# ---------------------------------------------------------------------------------------------
# The chat path on the offline SmolLM2 (slow: loads the model, generates)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_chat_translator_on_smollm2_for_two_short_items(tmp_path):
    items = pd.DataFrame([
        {**dict.fromkeys(ITEM_COLUMNS, ""), "item_id": "t-1/en", "base_id": "t-1", "source": "written",
         "dimension": "gender", "category": "pronoun", "language": "en", "variant": "original", "via": "human",
         "context": "The nurse said that", "stereotyped": "she was tired.", "anti_stereotyped": "he was tired.",
         "third": "the sky is blue.", "third_kind": "unrelated"},
        {**dict.fromkeys(ITEM_COLUMNS, ""), "item_id": "t-2/en", "base_id": "t-2", "source": "written",
         "dimension": "age", "category": "trait", "language": "en", "variant": "original", "via": "human",
         "context": "My grandfather", "stereotyped": "hates phones.", "anti_stereotyped": "loves phones.",
         "third": "is tall.", "third_kind": "unrelated"},
    ])
    translator = tr.ChatTranslator("smollm2-135m", device="cpu", batch_size=8, max_new_tokens=40,
                                   cache=tmp_path / "c.sqlite", progress=False)
    result = tr.translate_items(items, translator, ["es"])
    assert len(result.items) + len(result.failed) == 2
    assert translator.calls == 8
    texts = [t for column in ("context", "stereotyped", "anti_stereotyped", "third") for t in items[column]]
    table = translator.translate_detailed(texts, "en", "es")
    assert table["cached"].all() and table["raw"].str.len().gt(0).all()
    # Each outcome is the cleaning rules applied to the model's own reply (the end-of-turn marker
    # tells a finished reply from one cut off), and the chat path does produce usable Spanish:
    # a broken chat template or decoding loop would leave nothing accepted.
    for text, raw, translation, reason in table[["text", "raw", "translation", "reason"]].itertuples(index=False):
        expected = tr.clean_reply(raw, text, "en", "es", finished=tr.END_OF_REPLY in raw)
        assert (translation, reason) == (expected.output, expected.reason)
    accepted = table["translation"].dropna()
    assert len(accepted) >= 2 and all(languages.script_share(t, "es") > 0.9 for t in accepted)
