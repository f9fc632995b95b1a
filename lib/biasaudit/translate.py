"""Translating and rewording items (the MLA-BiTe method): one interface over several translators.

Every translator answers `translate(texts, source, target)` with one translation per text, or
None where it failed (a failed translation is never used). Behind that one call:

- repeated strings are translated once (item banks repeat contexts and answer wordings);
- raw model outputs are kept in an on-disk cache keyed by backend, model, settings (prompt
  version, decoding), languages and text, written after every batch, so a rerun costs nothing
  and an interrupted run resumes; cleaning runs again on every read, so a better cleaning rule
  needs no new model call;
- work goes in batches, with a progress bar.

Backends: `Seq2SeqTranslator` (transformers NLLB-200, M2M100, Marian; each with its own
language codes), `ChatTranslator` (an instruction-tuned causal LM through its chat template,
with this project's prompts and tested output-cleaning rules), and `TableTranslator` (human
translations from an item bank).

On top of them: `translate_items` (item by item, field by field, so the contrast between the two
continuations survives or is flagged as collapsed), `round_trip` (English rewordings through
pivot languages) and LLM paraphrasing (`Paraphraser`, in both orders with translation).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import difflib
import hashlib
import json
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
from tqdm.auto import tqdm

from biasaudit.items import ITEM_COLUMNS, NO_SPACE_LANGUAGES, OPTIONS, is_collapsed, normalise, validate_items
from biasaudit.models import cache_dir

TEXT_FIELDS: tuple[str, ...] = ("context", *OPTIONS)

LANGUAGE_NAMES: dict[str, str] = {
    "ar": "Arabic", "bn": "Bengali", "de": "German", "el": "Greek", "en": "English", "es": "Spanish",
    "fa": "Persian", "fi": "Finnish", "fr": "French", "he": "Hebrew", "hi": "Hindi", "id": "Indonesian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ru": "Russian", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "zh": "Chinese (Simplified)",
}

# FLORES-200 codes used by NLLB-200 (language + script).
NLLB_CODES: dict[str, str] = {
    "ar": "arb_Arab", "bn": "ben_Beng", "de": "deu_Latn", "el": "ell_Grek", "en": "eng_Latn",
    "es": "spa_Latn", "fa": "pes_Arab", "fi": "fin_Latn", "fr": "fra_Latn", "he": "heb_Hebr",
    "hi": "hin_Deva", "id": "ind_Latn", "it": "ita_Latn", "ja": "jpn_Jpan", "ko": "kor_Hang",
    "nl": "nld_Latn", "pl": "pol_Latn", "pt": "por_Latn", "ru": "rus_Cyrl", "sv": "swe_Latn",
    "sw": "swh_Latn", "ta": "tam_Taml", "th": "tha_Thai", "tr": "tur_Latn", "uk": "ukr_Cyrl",
    "ur": "urd_Arab", "vi": "vie_Latn", "zh": "zho_Hans",
}

# ISO 639-3 codes: multi-target Marian (OPUS-MT) models select the target with a `>>xxx<<`
# token, spelled with the two-letter code in older models and the three-letter one in newer.
ISO_639_3: dict[str, str] = {
    "ar": "ara", "de": "deu", "en": "eng", "es": "spa", "fi": "fin", "fr": "fra", "hi": "hin",
    "it": "ita", "ja": "jpn", "ko": "kor", "nl": "nld", "pt": "por", "ru": "rus", "sw": "swa",
    "tr": "tur", "zh": "zho",
}

# Unicode ranges of the script a language is written in; a reply in another script has failed.
SCRIPTS: dict[str, tuple[str, str]] = {
    "Arabic": ("\u0600-\u06ff\u0750-\u077f\ufb50-\ufdff\ufe70-\ufeff", "ar fa ur"),
    "Han": ("\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff", "zh"),
    "Japanese": ("\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff", "ja"),
    "Hangul": ("\u1100-\u11ff\u3130-\u318f\uac00-\ud7af", "ko"),
    "Devanagari": ("\u0900-\u097f", "hi"),
    "Bengali": ("\u0980-\u09ff", "bn"),
    "Tamil": ("\u0b80-\u0bff", "ta"),
    "Cyrillic": ("\u0400-\u04ff", "ru uk"),
    "Greek": ("\u0370-\u03ff", "el"),
    "Hebrew": ("\u0590-\u05ff", "he"),
    "Thai": ("\u0e00-\u0e7f", "th"),
    "Latin": ("A-Za-z\u00c0-\u024f\u1e00-\u1eff", "de en es fi fr id it nl pl pt sv sw tr vi"),
}
SCRIPT_OF: dict[str, str] = {lang: script for script, (_, langs) in SCRIPTS.items() for lang in langs.split()}

PLACEHOLDER = re.compile(r"\{[A-Z][A-Z0-9_]*\}")
SENTENCE_END = ".!?。！？؟।…\"'”’»)"
QUESTION_MARKS = ("?", "？", "؟")


def language_name(code: str) -> str:
    """English name of an ISO 639-1 code, for prompts (the code itself when unknown)."""
    return LANGUAGE_NAMES.get(code, code)


def slug(name: str) -> str:
    """A model name shortened for item ids: the last path part that is left once `{source}`/`{target}`
    patterns are removed, in [A-Za-z0-9._-] only."""
    parts = [re.sub(r"[^A-Za-z0-9._-]+", "-", re.sub(r"\{\w+\}", "", part)).strip("-.") for part in name.split("/")]
    parts = [re.sub(r"-{2,}", "-", part) for part in parts if any(c.isalnum() for c in part)]
    return parts[-1] if parts else "model"


# ---------------------------------------------------------------------------------------------
# The on-disk cache
# ---------------------------------------------------------------------------------------------


class KeyValueStore:
    """A small SQLite table of key → value: the translation and embedding caches.

    Every `put_many` commits, so whatever finished before an interruption is kept. SQLite
    rather than a folder of files, because one run writes tens of thousands of short entries.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB)")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def get_many(self, keys: Sequence[str]) -> dict[str, object]:
        found: dict[str, object] = {}
        with self._connect() as db:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                found.update(db.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk).fetchall())
        return found

    def put_many(self, rows: Iterable[tuple[str, object]]) -> None:
        with self._connect() as db:
            db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?)", list(rows))

    def __len__(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


def default_cache_path() -> Path:
    """The shared translation cache: <cache_dir>/translations.sqlite (BIASAUDIT_CACHE_DIR moves it)."""
    return cache_dir() / "translations.sqlite"


def cache_key(*parts: object) -> str:
    """A stable hash of the parts (JSON-encoded): the key of one cache entry."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# The translator interface
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a backend made of one text: the usable output (None = failed), its raw form, and why it failed."""

    output: str | None
    raw: str
    reason: str = ""


class CachedTextMap(ABC):
    """Map texts to outputs in batches, once per distinct text, through the on-disk cache.

    Subclasses set `backend`, implement `_generate` (texts → raw model outputs) and
    `_outcome` (raw output → usable output or a failure). The cache keeps the raw outputs, the
    expensive part, and cleaning runs on every read, so improving a cleaning rule needs no new
    model call. `settings()` lists whatever else changes the raw output (prompt version,
    decoding), so changing it misses the cache. `cache=False` turns the cache off; a path puts
    it elsewhere (e.g. in the run folder).
    """

    backend: str = "?"

    def __init__(self, name: str, *, batch_size: int = 16, cache: str | Path | bool | None = None,
                 progress: bool = True):
        self.name = name
        self.batch_size = batch_size
        self.progress = progress
        if cache is False:
            self.store = None
        else:
            self.store = KeyValueStore(default_cache_path() if cache in (None, True) else cache)
        self.calls = 0  # texts sent to the model (not served from the cache): tests and timings read it

    def settings(self) -> dict:
        return {}

    def model_name(self, source: str, target: str) -> str:
        return self.name

    @abstractmethod
    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        """Raw model replies for texts not found in the cache, one per text."""

    @abstractmethod
    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        """The cleaned, validated output of one raw reply (or why it failed)."""

    def run_detailed(self, texts: Sequence[str], source: str, target: str) -> pd.DataFrame:
        """One row per input text: text, output (None if failed), raw, reason, cached.

        Empty texts map to empty outputs without a model call.
        """
        texts = [str(t) for t in texts]
        distinct = list(dict.fromkeys(t for t in texts if t.strip()))
        model = self.model_name(source, target)
        keys = {t: cache_key(self.backend, model, self.settings(), source, target, t) for t in distinct}
        raw: dict[str, str] = {}
        if self.store is not None and distinct:
            found = self.store.get_many(list(keys.values()))
            raw = {t: str(found[k]) for t, k in keys.items() if k in found}
        cached = set(raw)
        todo = sorted((t for t in distinct if t not in raw), key=len)
        if todo:
            bar = tqdm(total=len(todo), desc=f"{self.backend} {source}→{target}", disable=not self.progress,
                       leave=False)
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start:start + self.batch_size]
                outputs = self._generate(batch, source, target)
                if len(outputs) != len(batch):
                    raise RuntimeError(f"{type(self).__name__} returned {len(outputs)} outputs for {len(batch)} texts")
                self.calls += len(batch)
                raw.update(zip(batch, outputs))
                if self.store is not None:
                    self.store.put_many((keys[t], o) for t, o in zip(batch, outputs))
                bar.update(len(batch))
            bar.close()
        outcomes = {t: self._outcome(raw[t], t, source, target) for t in distinct}
        rows = []
        for text in texts:
            if not text.strip():
                rows.append({"text": text, "output": text, "raw": text, "reason": "", "cached": False})
            else:
                o = outcomes[text]
                rows.append({"text": text, "output": o.output, "raw": o.raw, "reason": o.reason,
                             "cached": text in cached})
        return pd.DataFrame(rows, columns=["text", "output", "raw", "reason", "cached"])


class Translator(CachedTextMap):
    """One interface for every translation backend: `translate(texts, source, target)`.

    `name` is what item tables record in `via`. Language arguments are ISO 639-1 codes.
    """

    def translate(self, texts: Sequence[str], source: str, target: str) -> list[str | None]:
        """One translation per text, in order; None where the translation failed (never use it)."""
        return self.translate_detailed(texts, source, target)["translation"].tolist()

    def translate_detailed(self, texts: Sequence[str], source: str, target: str) -> pd.DataFrame:
        """Like `translate`, with the raw output, the reason for each failure and whether it was cached."""
        table = self.run_detailed(texts, source, target).rename(columns={"output": "translation"})
        table["translation"] = table["translation"].astype(object).where(table["translation"].notna(), None)
        return table


# ---------------------------------------------------------------------------------------------
# Cleaning and validating model output
# ---------------------------------------------------------------------------------------------

END_OF_REPLY = "<|end|>"
END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "</s>", "<|end|>")
_QUOTE_PAIRS = [('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("«", "»"), ("„", "“"), ("「", "」"),
                ("『", "』"), ("`", "`"), ("**", "**"), ("*", "*")]
_PLEASANTRY = re.compile(r"^(?:sure|okay|ok|certainly|of course|absolutely|here you go|here you are)\s*[!.,:]?$", re.I)
_SAME_LINE_PREAMBLE = re.compile(
    r"^(?:(?:sure|okay|ok|certainly|of course)\s*[!.,]?\s*)?(?:here(?:'s| is)|below is)\b[^:\n]{0,80}:\s*(\S.*)$", re.I
)
_PREAMBLE_LINE = re.compile(
    r"^(?:(?:sure|okay|ok|certainly|of course)\s*[!.,]?\s*)?[^\n]{0,100}\b(?:translation|translated|translate|"
    r"rewordings?|paraphrases?|versions?)\b[^\n]{0,40}:\s*\**$",
    re.I,
)
_NOTE_LINE = re.compile(
    r"^\W*(?:notes?|explanation|explained|literally|literal translation|alternatively|please note|note that|"
    r"i hope|let me know|i (?:made|added|changed|kept|used|translated|have|am sorry)|i'm sorry|i'?ve|here|"
    r"this is|this translation|th(?:e|is) (?:\w+ ){0,2}(?:translation|original|sentence|text)|in this|"
    r"translate|translation|original)\b",
    re.I,
)
# A reply that repeats the prompt's own rules back is not part of a translation.
_RULE_ECHO = re.compile(r"no quotes, no label, no notes|do not complete it|copy every marker", re.I)
_TRAILING_NOTE = re.compile(
    r"\s*[(\[](?:note|notes|literally|lit\.|i\.e\.|translation|translated)\b[^)\]]*[)\]]\s*$", re.I)
_REFUSAL = re.compile(r"^\W*(?:i'?m sorry|i am sorry|sorry,|i cannot|i can'?t|i can not|i'?m unable|i am unable|"
                      r"as an ai)\b", re.I)


def _label_pattern(target: str) -> re.Pattern:
    name = re.escape(language_name(target).split(" (")[0])
    return re.compile(
        rf"^\W{{0,3}}(?:{name}(?:\s+translation)?|translation|translated text|output|answer|traducción|traduction|"
        rf"übersetzung)\W{{0,3}}:\W{{0,3}}(\S.*)$",
        re.I,
    )


def strip_end_markers(reply: str) -> str:
    """Cut a reply at the first end-of-turn marker a decoder left in the text."""
    for marker in END_MARKERS:
        reply = reply.split(marker)[0]
    return reply.replace("\r\n", "\n").strip()


def unwrap(text: str, keep_like: str = "") -> str:
    """Strip quotes or Markdown emphasis that wrap the whole text (unless `keep_like` is wrapped the same way)."""
    changed = True
    while changed and len(text) >= 2:
        changed = False
        for left, right in _QUOTE_PAIRS:
            if (len(text) > len(left) + len(right) and text.startswith(left) and text.endswith(right)
                    and not (keep_like.startswith(left) and keep_like.endswith(right))):
                inner = text[len(left):len(text) - len(right)]
                if left in ('"', "'", "`") and left in inner:
                    continue  # 'a' and 'b': two quoted parts, not one wrapped text
                text, changed = inner.strip(), True
                break
    return text


def script_share(text: str, language: str) -> float | None:
    """Share of the letters of `text` written in the script of `language` (None: script unknown)."""
    script = SCRIPT_OF.get(language)
    letters = [c for c in text if c.isalpha()]
    if script is None or not letters:
        return None
    pattern = re.compile(f"[{SCRIPTS[script][0]}]")
    return sum(bool(pattern.match(c)) for c in letters) / len(letters)


def _most_repeated(text: str, language: str) -> int:
    """How often the most frequent run of 3 words (4 characters where words are not spaced) occurs."""
    tokens = list(text.casefold()) if language in NO_SPACE_LANGUAGES or language == "ja" else text.casefold().split()
    n = 4 if language in NO_SPACE_LANGUAGES or language == "ja" else 3
    grams = Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return max(grams.values(), default=0)


def validate_output(candidate: str, text: str, source: str, target: str) -> str:
    """Why `candidate` cannot be used as the translation of `text` ("" when it can).

    The checks: empty; a refusal; `{PLACEHOLDER}` markers changed; the source text returned or
    repeated (three words or more, when the languages differ); far longer than a translation
    can be; a decoding loop (a run of three words three times, where the text has none); a
    question that is no longer a question; written in the wrong script.
    """
    if not candidate.strip():
        return "empty"
    if _REFUSAL.match(candidate) and not _REFUSAL.match(text):
        return "refusal"
    if Counter(PLACEHOLDER.findall(candidate)) != Counter(PLACEHOLDER.findall(text)):
        return "placeholders changed"
    if source != target and len(text.split()) >= 3 and normalise(text) in normalise(candidate):
        return "source text returned untranslated"
    if len(candidate) > 3 * len(text) + 40:
        return "too long to be only a translation"
    if _most_repeated(candidate, target) >= 3 > _most_repeated(text, source):
        return "repeats itself (a decoding loop)"
    if text.rstrip().endswith(QUESTION_MARKS) and not candidate.rstrip().endswith(QUESTION_MARKS):
        return "the question is no longer a question"
    share = script_share(candidate, target)
    if share is not None and share < 0.5:
        return f"not written in the {SCRIPT_OF[target]} script"
    return ""


def clean_reply(reply: str, text: str, source: str, target: str, *, finished: bool = True) -> Outcome:
    """Turn a chat model's reply into a translation of `text`, or mark it failed.

    The rules, in order (each is covered by a table test):
      1. cut at end-of-turn markers; drop code fences and <text>/<translation> tags;
      2. a line labelled with the target language or "Translation:" is the translation;
      3. drop leading lines that only announce it ("Sure!", "Here is the translation:"), or keep
         what follows the colon when the announcement and the translation share a line;
      4. drop everything from the first note line after the translation on ("Note: ...",
         "This is a French translation ...", "I made ...", "The original text was ..."), lines
         that repeat the prompt's rules, and a trailing "(Note: ...)" or "(literally ...)";
      5. the same line repeated counts once; more than one different line left for a one-line
         text: failed (which line is the translation?);
      6. strip quotes or emphasis wrapping the whole reply;
      7. a reply cut off by the token limit (`finished` False) whose last line is the
         candidate: failed, the translation may be incomplete;
      8. `validate_output`.
    """
    cleaned = strip_end_markers(reply)
    cleaned = re.sub(r"^```[\w-]*\s*\n?|\n?\s*```$", "", cleaned).strip()
    cleaned = re.sub(r"</?(?:text|translation)>", "", cleaned).strip()
    lines = [line.strip() for line in cleaned.split("\n")]
    label = _label_pattern(target)
    for line in lines:
        match = label.match(line)
        if match:
            lines = [match.group(1)]
            break
    while lines and (not lines[0] or _PLEASANTRY.match(lines[0]) or _PREAMBLE_LINE.match(lines[0])):
        lines.pop(0)
    if lines:
        match = _SAME_LINE_PREAMBLE.match(lines[0])
        if match:
            lines[0] = match.group(1)
    for index, line in enumerate(lines):
        if index > 0 and _NOTE_LINE.match(line):
            lines = lines[:index]
            break
    lines = [line for line in lines if line and not _RULE_ECHO.search(line)]
    if not lines:
        return Outcome(None, reply, "empty")
    last_line = next((line.strip() for line in reversed(strip_end_markers(reply).split("\n")) if line.strip()), "")
    if not finished and last_line.endswith(lines[-1]):
        return Outcome(None, reply, "cut off at the token limit")
    if len(set(lines)) == 1:
        lines = lines[:1]  # a model stuck in a loop repeats its one translation
    if len(lines) > 1 and "\n" not in text.strip():
        return Outcome(None, reply, "several lines: cannot tell which one is the translation")
    candidate = _TRAILING_NOTE.sub("", "\n".join(lines)).strip()
    candidate = unwrap(candidate, keep_like=text.strip())
    reason = validate_output(candidate, text, source, target)
    return Outcome(None if reason else candidate, reply, reason)


_GERMAN_LOWER = {"er", "sie", "es", "wir", "ihr", "ich", "du", "der", "die", "das", "den", "dem", "des", "ein",
                 "eine", "einen", "einem", "einer", "und", "aber", "oder", "dass", "weil", "wenn", "als", "hat",
                 "ist", "war", "wurde", "würde", "sein", "seine", "ihre", "mein", "meine", "nicht", "sehr", "immer"}


def fit_fragment(text: str, translation: str, target: str) -> str:
    """Make a translated item field join like the original: initial case and final punctuation.

    Item fields are pieces of one sentence (a context without its end, a continuation that
    starts in lower case). Translated alone they come back as sentences, so: a continuation
    whose source starts in lower case gets a lower-case first letter (not in German, whose
    nouns are capitalised, unless it starts with a pronoun, article or conjunction; and not
    for English "I"), and a context whose source has no final
    punctuation loses the full stop the translator added.
    """
    out = translation.strip()
    if text[:1].islower() and out[:1].isupper():
        first = out.split(" ", 1)[0]
        keep = (target == "en" and first in {"I", "I'm", "I'd", "I'll", "I've"}) or (
            target == "de" and first.lower() not in _GERMAN_LOWER)
        if not keep:
            out = out[0].lower() + out[1:]
    if text and text.rstrip()[-1:] not in SENTENCE_END and out.endswith((".", "。", "।")) and not out.endswith(".."):
        out = out[:-1].rstrip()
    return out


# ---------------------------------------------------------------------------------------------
# Backend: transformers sequence-to-sequence models
# ---------------------------------------------------------------------------------------------


def detect_family(config, tokenizer) -> str:
    """"nllb", "m2m100", "marian" or "generic", from the model config and tokenizer."""
    kind = getattr(config, "model_type", "")
    if "nllb" in type(tokenizer).__name__.lower() or "eng_Latn" in tokenizer.get_vocab():
        return "nllb"
    if kind == "m2m_100":
        return "m2m100"
    if kind == "marian":
        return "marian"
    return "generic"


class Seq2SeqTranslator(Translator):
    """A transformers encoder-decoder translation model (NLLB-200, M2M100, Marian, ...).

    `model` is a hub id or a local folder. For Marian, whose models each cover one language
    pair, it may be a pattern such as "Helsinki-NLP/opus-mt-{source}-{target}"; each pair's model
    is then loaded when first needed. Language codes are mapped per family: NLLB takes FLORES-200
    codes (`NLLB_CODES`) as `src_lang` and as the forced first target token, M2M100 its ISO codes
    the same way, and a multi-target Marian model a `>>xx<<` token in front of the text.
    `language_codes` overrides the mapping for a language.
    """

    backend = "seq2seq"

    def __init__(self, model: str, *, device: str | None = None, dtype=None, num_beams: int = 1,
                 max_new_tokens: int = 256, batch_size: int = 16, language_codes: dict[str, str] | None = None,
                 cache: str | Path | bool | None = None, progress: bool = True):
        super().__init__(model, batch_size=batch_size, cache=cache, progress=progress)
        self.device = device
        self.dtype = dtype
        self.num_beams = num_beams
        self.max_new_tokens = max_new_tokens
        self.language_codes = dict(language_codes or {})
        self._loaded: dict[str, tuple[object, object, str]] = {}

    def settings(self) -> dict:
        return {"num_beams": self.num_beams, "max_new_tokens": self.max_new_tokens, "codes": self.language_codes}

    def model_name(self, source: str, target: str) -> str:
        return self.name.format(source=source, target=target)

    def _load(self, source: str, target: str):
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from biasaudit.models import default_device, default_dtype

        path = self.model_name(source, target)
        if path not in self._loaded:
            device = self.device or default_device()
            tokenizer = AutoTokenizer.from_pretrained(path)
            network = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=self.dtype or default_dtype(device))
            network.to(device).eval()
            self._loaded[path] = (network, tokenizer, detect_family(network.config, tokenizer))
        return self._loaded[path]

    def code(self, family: str, language: str) -> str:
        """The code a model family uses for an ISO 639-1 language."""
        if language in self.language_codes:
            return self.language_codes[language]
        if family == "nllb":
            if language not in NLLB_CODES:
                raise KeyError(f"no NLLB-200 code for {language!r}; pass language_codes={{{language!r}: 'xxx_Xxxx'}}")
            return NLLB_CODES[language]
        return language

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        import torch

        network, tokenizer, family = self._load(source, target)
        inputs = list(texts)
        generate_kwargs: dict = {}
        if family in ("nllb", "m2m100"):
            tokenizer.src_lang = self.code(family, source)
            target_code = self.code(family, target)
            if family == "m2m100":
                target_id = tokenizer.get_lang_id(target_code)
            else:
                target_id = tokenizer.convert_tokens_to_ids(target_code)
            generate_kwargs["forced_bos_token_id"] = target_id
        elif family == "marian":
            vocab = tokenizer.get_vocab()
            for code in (self.code(family, target), ISO_639_3.get(target, "")):
                if code and f">>{code}<<" in vocab:
                    inputs = [f">>{code}<< {t}" for t in inputs]
                    break
        positions = getattr(network.config, "max_position_embeddings", None) or tokenizer.model_max_length
        encoded = tokenizer(inputs, return_tensors="pt", padding=True, truncation=True,
                            max_length=min(tokenizer.model_max_length, positions))
        encoded = {k: v.to(network.device) for k, v in encoded.items()}
        longest = int(encoded["attention_mask"].sum(dim=1).max())
        budget = min(self.max_new_tokens, 2 * longest + 10, positions - 2)
        with torch.inference_mode():
            generated = network.generate(**encoded, num_beams=self.num_beams, do_sample=False, max_new_tokens=budget,
                                         **generate_kwargs)
        return [o.strip() for o in tokenizer.batch_decode(generated, skip_special_tokens=True)]

    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        reason = validate_output(raw, text, source, target)
        return Outcome(None if reason else raw, raw, reason)


# ---------------------------------------------------------------------------------------------
# Backend: instruction-tuned causal LMs through their chat template
# ---------------------------------------------------------------------------------------------


class ChatModel:
    """A chat model that answers lists of conversations in batches (greedy decoding, left padding).

    A reply the model ended itself carries END_OF_REPLY at its end; one cut off by the token
    limit does not, so cleaning can tell an unfinished translation from a finished one.

    `model` is a hub id, a local folder or an offline short name (`biasaudit.models`);
    `network`/`tokenizer` may be passed already loaded.
    """

    def __init__(self, model: str, *, network=None, tokenizer=None, device: str | None = None, dtype=None):
        self.name = model
        self._network, self._tokenizer = network, tokenizer
        self.device, self.dtype = device, dtype

    def _load(self):
        if self._network is None:
            from biasaudit.models import load_model

            self._network, self._tokenizer = load_model(self.name, device=self.device, dtype=self.dtype)
        if not getattr(self._tokenizer, "chat_template", None):
            raise ValueError(f"{self.name}: the tokenizer has no chat template; use an instruction-tuned model")
        return self._network, self._tokenizer

    def token_count(self, text: str) -> int:
        _, tokenizer = self._load()
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def reply(self, conversations: list[list[dict]], *, max_new_tokens: int) -> list[str]:
        import torch

        network, tokenizer = self._load()
        prompts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        encoded = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        encoded = {k: v.to(network.device) for k, v in encoded.items()}
        with torch.inference_mode():
            generated = network.generate(**encoded, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=pad)
        replies = []
        stops = {tokenizer.eos_token_id, pad}
        for row in generated[:, encoded["input_ids"].shape[1]:].tolist():
            end = next((i for i, token in enumerate(row) if token in stops), None)
            text = tokenizer.decode(row[:end], skip_special_tokens=True)
            replies.append(text + END_OF_REPLY if end is not None else text)
        return replies


# The rules go in the system message and the user message is the text alone: small models
# follow that layout far better than a long user message (they tend to continue the rules),
# and an item's text can never be read as an instruction.
TRANSLATE_SYSTEM = """You are a professional translator for a research study that compares languages. Translate the user's {source} text into {target}.
Rules:
- Keep the exact meaning. Do not add, drop, soften or explain anything.
- The text may be an unfinished sentence or the end of a sentence. Translate it as it is; do not complete it.
- Copy every marker in curly braces, such as {{PERSON}}, exactly as it is.
- If the text is a yes/no question, the translation must also be a yes/no question.
- Reply with the {target} translation only: no quotes, no label, no notes."""


def translation_prompt(text: str, source: str, target: str) -> list[dict]:
    """The chat messages that ask for one translation: the rules as system message, the text as user message."""
    names = {"source": language_name(source), "target": language_name(target)}
    return [{"role": "system", "content": TRANSLATE_SYSTEM.format(**names)}, {"role": "user", "content": text}]


def prompt_version(*templates: str) -> str:
    """A short hash of prompt templates: part of the cache key, so editing a prompt asks the model again."""
    return hashlib.sha256("\n".join(templates).encode()).hexdigest()[:12]


class ChatTranslator(Translator):
    """An instruction-tuned causal LM as a translator, prompted through its chat template.

    Replies go through `clean_reply`; one that cannot be cleaned is failed (None), never used.
    The prompt's version is part of the cache key, so editing the prompt retranslates.
    """

    backend = "chat"

    def __init__(self, model: str, *, network=None, tokenizer=None, device: str | None = None, dtype=None,
                 batch_size: int = 8, max_new_tokens: int = 200, cache: str | Path | bool | None = None,
                 progress: bool = True):
        super().__init__(model, batch_size=batch_size, cache=cache, progress=progress)
        self.chat = ChatModel(model, network=network, tokenizer=tokenizer, device=device, dtype=dtype)
        self.max_new_tokens = max_new_tokens

    def settings(self) -> dict:
        return {"prompt": prompt_version(TRANSLATE_SYSTEM), "max_new_tokens": self.max_new_tokens}

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        budget = min(self.max_new_tokens, 2 * max(self.chat.token_count(t) for t in texts) + 16)
        return self.chat.reply([translation_prompt(t, source, target) for t in texts], max_new_tokens=budget)

    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        return clean_reply(raw, text, source, target, finished=END_OF_REPLY in raw)


# ---------------------------------------------------------------------------------------------
# Backend: a table of human translations
# ---------------------------------------------------------------------------------------------


class TableTranslator(Translator):
    """Human translations from an item table (the project's bank): a lookup, not a model.

    `translate` maps a text of an English original's field to the same field of that item's
    version in the target language. The bank's translators sometimes moved words between
    context and continuation to keep the contrast (see data/items/README.md), so for whole
    items use `translate_items`, which takes the human versions as written. A text that maps to
    different translations in different items takes the first one; a missing one fails.
    """

    backend = "table"

    def __init__(self, items: pd.DataFrame, *, name: str = "human"):
        super().__init__(name, cache=False, progress=False)
        self.items = items
        self.versions = items.loc[items["variant"] == "translation"]
        originals = items.loc[items["variant"] == "original"].set_index("base_id")
        self.lookup: dict[tuple[str, str], str] = {}
        for row in self.versions.itertuples(index=False):
            if row.base_id not in originals.index:
                continue
            for name in TEXT_FIELDS:
                key = (str(originals.at[row.base_id, name]), row.language)
                self.lookup.setdefault(key, getattr(row, name))

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        return [self.lookup.get((t, target), "") if source == "en" else "" for t in texts]

    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        if source != "en":
            return Outcome(None, "", "the table holds translations from English only")
        return Outcome(raw or None, raw, "" if raw else "no human translation in the table")

    def item_versions(self, base_ids: Iterable[str], target: str) -> pd.DataFrame:
        """The table's translations of these base items into `target`, as written."""
        ids = set(base_ids)
        return self.versions.loc[self.versions["base_id"].isin(ids) & (self.versions["language"] == target)]


def make_translator(name: str, *, kind: str = "auto", items: pd.DataFrame | None = None, **options) -> Translator:
    """A translator by name: "human" (the bank in `items`), a seq2seq model, or a chat model.

    `kind` "auto" asks the model's config whether it is an encoder-decoder; offline short names
    (`biasaudit.models.OFFLINE_MODELS`) are chat models.
    """
    if name == "human" or kind == "table":
        if items is None:
            raise ValueError("the human translator needs the item bank: make_translator('human', items=...)")
        return TableTranslator(items, name=name)
    if kind == "auto":
        from biasaudit.models import OFFLINE_MODELS

        if name in OFFLINE_MODELS:
            kind = "chat"
        else:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(name.format(source="en", target="de"))
            kind = "seq2seq" if getattr(config, "is_encoder_decoder", False) else "chat"
    if kind == "seq2seq":
        return Seq2SeqTranslator(name, **options)
    if kind == "chat":
        return ChatTranslator(name, **options)
    raise ValueError(f"translator kind {kind!r}: use 'auto', 'seq2seq', 'chat' or 'table'")


# ---------------------------------------------------------------------------------------------
# Items: translation, round trips, collapsed contrasts
# ---------------------------------------------------------------------------------------------


FAILED_COLUMNS: list[str] = ["item_id", "base_id", "language", "via", "field", "text", "reason"]


@dataclass
class ItemResult:
    """Item versions a step made, and those it could not make.

    `items` follows the items contract and includes collapsed versions (the pipeline sets them
    aside and counts them, as for any bank); `failed` has one row per version not made, with
    the field and reason of its first failure.
    """

    items: pd.DataFrame
    failed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FAILED_COLUMNS))

    @property
    def collapsed(self) -> pd.DataFrame:
        """Versions whose two contrasting continuations became the same text (NFKC + casefold)."""
        return self.items.loc[is_collapsed(self.items)] if len(self.items) else self.items

    def summary(self) -> pd.DataFrame:
        """Per language and route: versions made, failed, collapsed."""
        made = self.items.assign(collapsed=is_collapsed(self.items) if len(self.items) else False)
        made = made.groupby(["language", "via"]).agg(made=("item_id", "size"), collapsed=("collapsed", "sum"))
        failed = self.failed.groupby(["language", "via"]).size().rename("failed")
        table = made.join(failed, how="outer").fillna(0).astype(int).reset_index()
        return table[["language", "via", "made", "failed", "collapsed"]]


def translate_fields(rows: pd.DataFrame, translator: Translator, target: str, *, fit: bool = True,
                     fit_to: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """Translate the text fields of each row (from the row's own language) into `target`.

    Returns the rows whose every field was translated (index kept) and, for each other row,
    a failure record {index, field, text, reason} of its first failed field. With `fit`, each
    field is fitted (`fit_fragment`) to the same field of `fit_to` (default: the rows), matched
    by index: a round trip fits its English result to the English original.
    """
    if not rows.index.is_unique:
        raise ValueError("rows to translate need a unique index")
    reference = rows if fit_to is None else fit_to
    translated = rows.copy()
    ok = pd.Series(True, index=rows.index)
    failures: list[dict] = []
    for source, group in rows.groupby("language", sort=False):
        flat = [text for name in TEXT_FIELDS for text in group[name]]
        table = translator.translate_detailed(flat, source, target)
        for k, name in enumerate(TEXT_FIELDS):
            results = table["translation"].iloc[k * len(group):(k + 1) * len(group)]
            reasons = table["reason"].iloc[k * len(group):(k + 1) * len(group)]
            for index, text, value, reason in zip(group.index, group[name], results, reasons):
                if value is None:
                    if ok[index]:
                        failures.append({"index": index, "field": name, "text": text, "reason": reason})
                    ok[index] = False
                elif fit and text:
                    translated.at[index, name] = fit_fragment(str(reference.at[index, name]), value, target)
                else:
                    translated.at[index, name] = value
    return translated.loc[ok], failures


def _failure_table(rows: pd.DataFrame, failures: list[dict], item_ids: pd.Series, via: str | pd.Series,
                   language: str) -> pd.DataFrame:
    records = [{"item_id": item_ids[f["index"]], "base_id": rows.at[f["index"], "base_id"], "language": language,
                "via": via if isinstance(via, str) else via[f["index"]], "field": f["field"], "text": f["text"],
                "reason": f["reason"]} for f in failures]
    return pd.DataFrame(records, columns=FAILED_COLUMNS)


def _originals(items: pd.DataFrame) -> pd.DataFrame:
    originals = items.loc[items["variant"] == "original"].reset_index(drop=True)
    if originals.empty:
        raise ValueError("no English originals (variant 'original') in the items to translate")
    return originals


def _result(made: list[pd.DataFrame], failed: list[pd.DataFrame], originals: pd.DataFrame | None = None) -> ItemResult:
    """Collect versions and failures; check the versions against the items contract."""
    made = [m[ITEM_COLUMNS] for m in made if len(m)]
    items = pd.concat(made, ignore_index=True) if made else pd.DataFrame(columns=ITEM_COLUMNS)
    if len(items) and originals is not None:
        validate_items(pd.concat([originals[ITEM_COLUMNS], items], ignore_index=True), origin="made item versions")
    failed = [f for f in failed if len(f)]
    failures = pd.concat(failed, ignore_index=True) if failed else pd.DataFrame(columns=FAILED_COLUMNS)
    return ItemResult(items, failures)


def translate_items(items: pd.DataFrame, translator: Translator, targets: Sequence[str], *,
                    fit_fragments: bool = True) -> ItemResult:
    """Translate the English originals in `items` into each target language, field by field.

    Context and each continuation are translated separately, so every version keeps the
    item's structure; an item whose two contrasting continuations come out the same is kept
    but flagged (`ItemResult.collapsed`). Versions get variant "translation", via the
    translator's name, and item_id "<base_id>/<lang>@<model>" (the bank's human translations
    keep "<base_id>/<lang>"). A `TableTranslator` returns the table's versions as written.
    """
    originals = _originals(items)
    made, failed = [], []
    for target in targets:
        if isinstance(translator, TableTranslator):
            versions = translator.item_versions(originals["base_id"], target)
            missing = originals.loc[~originals["base_id"].isin(versions["base_id"])]
            made.append(versions)
            failed.append(pd.DataFrame({"item_id": missing["base_id"] + f"/{target}", "base_id": missing["base_id"],
                                        "language": target, "via": translator.name, "field": "item", "text": "",
                                        "reason": "no human translation in the table"}, columns=FAILED_COLUMNS))
            continue
        item_ids = originals["base_id"] + f"/{target}@{slug(translator.name)}"
        translated, failures = translate_fields(originals, translator, target, fit=fit_fragments)
        made.append(translated.assign(language=target, variant="translation", via=translator.name,
                                      item_id=item_ids.loc[translated.index]))
        failed.append(_failure_table(originals, failures, item_ids, translator.name, target))
    return _result(made, failed, originals)


@dataclass
class RoundTrip(ItemResult):
    """English rewordings made by translating to a pivot language and back.

    `unchanged` gives, per pivot, the share of text fields (context and the three options) and
    of whole items that came back exactly as they went in (NFKC + casefold): a round trip that
    changes nothing is no rewording. `pivots` holds the pivot-language texts.
    """

    unchanged: pd.DataFrame = field(default_factory=pd.DataFrame)
    pivots: pd.DataFrame = field(default_factory=pd.DataFrame)


def round_trip(items: pd.DataFrame, translator: Translator, pivots: Sequence[str] = ("de", "fi", "ja"), *,
               back_translator: Translator | None = None, fit_fragments: bool = True) -> RoundTrip:
    """Reword the English originals by a round trip through each pivot language.

    Versions get variant "rewording", language "en", via the pivot and item_id
    "<base_id>/en~<pivot>" (DESIGN.md). `back_translator` defaults to `translator`.
    """
    originals = _originals(items)
    back = back_translator or translator
    made, failed, unchanged, middles = [], [], [], []
    for pivot in pivots:
        item_ids = originals["base_id"] + f"/en~{pivot}"
        forward, failures = translate_fields(originals, translator, pivot, fit=fit_fragments)
        forward = forward.assign(language=pivot)
        returned, back_failures = translate_fields(forward, back, "en", fit=fit_fragments, fit_to=originals)
        returned = returned.assign(language="en", variant="rewording", via=pivot, item_id=item_ids.loc[returned.index])
        middles.append(forward.assign(via=translator.name))
        made.append(returned)
        failed.append(_failure_table(originals, failures + back_failures, item_ids, pivot, "en"))
        unchanged.append(unchanged_share(originals, returned).assign(pivot=pivot))
    result = _result(made, failed, originals)
    shares = pd.concat(unchanged, ignore_index=True)[["pivot", "items", "share_fields_unchanged",
                                                      "share_items_unchanged"]] if unchanged else pd.DataFrame()
    return RoundTrip(result.items, result.failed, unchanged=shares,
                     pivots=pd.concat(middles, ignore_index=True) if middles else pd.DataFrame())


def unchanged_share(originals: pd.DataFrame, versions: pd.DataFrame,
                    fields: Sequence[str] = TEXT_FIELDS) -> pd.DataFrame:
    """Share of text fields, and of whole items, identical (NFKC + casefold) to the original."""
    pairs = versions.merge(originals, on="base_id", suffixes=("", "_original"))
    if pairs.empty:
        return pd.DataFrame({"items": [0], "share_fields_unchanged": [float("nan")],
                             "share_items_unchanged": [float("nan")]})
    same = pd.DataFrame({f: [normalise(a) == normalise(b) for a, b in zip(pairs[f], pairs[f + "_original"])]
                         for f in fields})
    return pd.DataFrame({"items": [len(pairs)], "share_fields_unchanged": [float(same.to_numpy().mean())],
                         "share_items_unchanged": [float(same.all(axis=1).mean())]})


# ---------------------------------------------------------------------------------------------
# LLM paraphrasing (MLA-BiTe)
# ---------------------------------------------------------------------------------------------

_PLURAL_CUES = {"they", "we", "them", "their", "these", "those", "are", "were", "have", "people", "men", "women",
                "children", "kids", "parents", "both", "many", "several", "few"}
_SINGULAR_CUES = {"he", "she", "his", "him", "is", "was", "has", "a", "an", "this", "man", "woman", "person",
                  "someone", "somebody"}
_SINGULAR_DETERMINERS = {"the", "this", "that", "my", "your", "our"}
_PLURAL_DETERMINERS = {"the", "these", "those", "many", "some", "all", "most", "few", "our", "their", "two", "three"}


def grammatical_number(text: str) -> str:
    """"singular", "plural" or "unknown": a heuristic on English cue words.

    Cues: plural and singular pronouns, verbs and determiners, and the noun after a determiner
    such as "the" ("the nurses" plural, "the nurse" singular). MLA-BiTe states the template's number
    in the paraphrase prompt so that a rewording does not turn "the nurse is" into "nurses
    are"; a tie or no cue gives "unknown", and the prompt then says nothing about number.
    """
    words = re.findall(r"[a-z']+", text.lower())
    plural = sum(w in _PLURAL_CUES for w in words) + sum(
        before in _PLURAL_DETERMINERS and len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is"))
        for before, w in zip(words, words[1:]))
    singular = sum(w in _SINGULAR_CUES for w in words) + sum(
        before in _SINGULAR_DETERMINERS and not w.endswith("s") for before, w in zip(words, words[1:]))
    if plural > singular:
        return "plural"
    if singular > plural:
        return "singular"
    return "unknown"


PARAPHRASE_SYSTEM = """You reword short texts for a research study. Write {n} different rewordings of the user's {language} text, in {language}.
Rules:
- Each rewording keeps the exact meaning: nothing added, dropped or softened.
{fragment}{number}- Copy every marker in curly braces, such as {{X1}}, exactly as it is, once each.
- The rewordings must differ from the text and from each other.
- Reply with a numbered list, one rewording per line ("1. ...", "2. ..."), and nothing else."""
_FRAGMENT_RULE = ("- The text is an unfinished sentence: each rewording must stay unfinished, so that it can be "
                  "continued exactly like the text.\n")
_NUMBER_RULE = "- The text is about {what}; every rewording must stay {number}.\n"


def paraphrase_prompt(text: str, language: str, n: int) -> list[dict]:
    """The chat messages asking for `n` rewordings of one text in one prompt (so that they differ).

    The rules (with the text's grammatical number, when known, and whether it is an unfinished
    sentence) are the system message; the text alone is the user message.
    """
    fragment = _FRAGMENT_RULE if text.strip() and text.rstrip()[-1] not in SENTENCE_END else ""
    number = grammatical_number(text) if language == "en" else "unknown"
    what = {"singular": "one person or thing (singular)", "plural": "several people or things (plural)"}
    number_rule = _NUMBER_RULE.format(what=what[number], number=number) if number in what else ""
    system = PARAPHRASE_SYSTEM.format(n=n, language=language_name(language), fragment=fragment, number=number_rule)
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


_NUMBERED = re.compile(r"^\s*(?:\*\*)?(\d{1,2})\s*[.):\]](?:\*\*(?=\s))?\s*(.+?)\s*$")


def parse_paraphrases(reply: str, text: str, language: str, n: int, *,
                      finished: bool = True) -> tuple[list[str], str]:
    """The valid, distinct rewordings in a numbered-list reply, and why any were missing ("" if none).

    Only numbered lines count; each is unwrapped of quotes and validated like a translation
    (placeholders kept, same script, not too long, no loop) and must differ from the text and
    from the rewordings before it. At most `n` are kept. In a reply cut off by the token limit
    (`finished` False) the last numbered line may be incomplete and is dropped.
    """
    found, problems = [], []
    seen = {normalise(text)}
    numbered = [m for m in (_NUMBERED.match(line) for line in strip_end_markers(reply).split("\n")) if m]
    if not finished and numbered:
        numbered = numbered[:-1]
        problems.append("cut off at the token limit")
    for match in numbered:
        candidate = _TRAILING_NOTE.sub("", unwrap(match.group(2).strip(), keep_like=text)).strip()
        reason = validate_output(candidate, text, language, language)
        if not reason and normalise(candidate) in seen:
            reason = "same as the text or an earlier rewording"
        if reason:
            problems.append(reason)
            continue
        seen.add(normalise(candidate))
        found.append(candidate)
    found = found[:n]
    if len(found) < n:
        problems.append(f"{len(found)} of {n} rewordings usable")
        return found, "; ".join(dict.fromkeys(problems))
    return found, ""


class Paraphraser(CachedTextMap):
    """An instruction LLM that writes `n` rewordings of each text in one prompt (MLA-BiTe).

    `paraphrase(texts, language)` gives, per text, its valid rewordings (possibly fewer than
    `n`; see `parse_paraphrases`). Cached and batched like translations.
    """

    backend = "paraphrase"

    def __init__(self, model: str, *, n: int = 3, network=None, tokenizer=None, device: str | None = None,
                 dtype=None, batch_size: int = 8, max_new_tokens: int = 400, cache: str | Path | bool | None = None,
                 progress: bool = True):
        super().__init__(model, batch_size=batch_size, cache=cache, progress=progress)
        self.n = n
        self.chat = ChatModel(model, network=network, tokenizer=tokenizer, device=device, dtype=dtype)
        self.max_new_tokens = max_new_tokens

    def settings(self) -> dict:
        return {"prompt": prompt_version(PARAPHRASE_SYSTEM, _FRAGMENT_RULE, _NUMBER_RULE),
                "n": self.n, "max_new_tokens": self.max_new_tokens}

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        longest = max(self.chat.token_count(t) for t in texts)
        budget = min(self.max_new_tokens, self.n * (2 * longest + 12) + 16)
        return self.chat.reply([paraphrase_prompt(t, source, self.n) for t in texts], max_new_tokens=budget)

    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        found, reason = parse_paraphrases(raw, text, source, self.n, finished=END_OF_REPLY in raw)
        return Outcome("\n".join(found) if found else None, raw, reason)

    def paraphrase_detailed(self, texts: Sequence[str], language: str) -> pd.DataFrame:
        """One row per text: text, rewordings (a list), raw, reason, cached. An empty text gets [""] * n."""
        table = self.run_detailed(texts, language, language)
        table["rewordings"] = [[""] * self.n if not t.strip() else ([] if pd.isna(o) else str(o).split("\n"))
                               for t, o in zip(table["text"], table["output"])]
        return table.drop(columns="output")

    def paraphrase(self, texts: Sequence[str], language: str) -> list[list[str]]:
        """Up to `n` valid rewordings of each text, in order."""
        return self.paraphrase_detailed(texts, language)["rewordings"].tolist()


def _tokens(text: str, language: str) -> list[str]:
    return list(text) if language in NO_SPACE_LANGUAGES else text.split(" ")


def contrast_template(first: str, second: str, language: str) -> tuple[str, list[str], list[str]]:
    """Write two contrasting continuations as one template with markers {X1}, {X2}, ... and their fillers.

    "he fixed it himself." / "she fixed it herself." → "{X1} fixed it {X2}", ["he", "himself."],
    ["she", "herself."]. Rewording the template once and filling it twice keeps the contrast
    exactly as small as in the original.
    """
    a, b = _tokens(first, language), _tokens(second, language)
    joiner = "" if language in NO_SPACE_LANGUAGES else " "
    parts, fill_a, fill_b = [], [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append(joiner.join(a[i1:i2]))
        else:
            parts.append(f"{{X{len(fill_a) + 1}}}")
            fill_a.append(joiner.join(a[i1:i2]))
            fill_b.append(joiner.join(b[j1:j2]))
    return joiner.join(p for p in parts if p), fill_a, fill_b


def fill_template(template: str, fillers: Sequence[str], language: str) -> str:
    """Put the fillers back into a template's {X1}, {X2}, ... markers (an empty filler drops its marker)."""
    out = template
    for k, filler in enumerate(fillers, start=1):
        out = out.replace(f"{{X{k}}}", filler)
    return out.strip() if language in NO_SPACE_LANGUAGES else re.sub(r"\s{2,}", " ", out).strip()


def paraphrase_items(items: pd.DataFrame, paraphraser: Paraphraser) -> ItemResult:
    """Reword each given item version in its own language, `paraphraser.n` times.

    The context and the third option are reworded as they are; the two contrasting
    continuations are reworded together as one template (`contrast_template`) and filled twice,
    so both get the same new wording. Rewording k uses the k-th rewording of every field and
    fails when a field has fewer than k. Versions: variant "rewording", via "<paraphraser>:p<k>",
    item_id "<base_id>/<lang>~<model>-p<k>".
    """
    rows = items.reset_index(drop=True)
    made, failed = [], []
    for language, group in rows.groupby("language", sort=False):
        templates = [contrast_template(s, a, language) for s, a in zip(group["stereotyped"], group["anti_stereotyped"])]
        fields = {"context": group["context"].tolist(), "template": [t for t, _, _ in templates],
                  "third": group["third"].tolist()}
        table = paraphraser.paraphrase_detailed([t for column in fields.values() for t in column], language)
        size = len(group)
        found = {name: table["rewordings"].iloc[k * size:(k + 1) * size].tolist() for k, name in enumerate(fields)}
        why = {name: table["reason"].iloc[k * size:(k + 1) * size].tolist() for k, name in enumerate(fields)}
        for pos, (_, row) in enumerate(group.iterrows()):
            _, fill_stereotyped, fill_anti = templates[pos]
            for k in range(1, paraphraser.n + 1):
                via = f"{paraphraser.name}:p{k}"
                item_id = f"{row['base_id']}/{language}~{slug(paraphraser.name)}-p{k}"
                short = [name for name in fields if len(found[name][pos]) < k]
                if short:
                    failed.append({"item_id": item_id, "base_id": row["base_id"], "language": language, "via": via,
                                   "field": short[0], "text": fields[short[0]][pos],
                                   "reason": why[short[0]][pos] or "no rewording"})
                    continue
                template = found["template"][pos][k - 1]
                made.append({**row.to_dict(), "item_id": item_id, "variant": "rewording", "via": via,
                             "context": found["context"][pos][k - 1] if row["context"] else "",
                             "stereotyped": fill_template(template, fill_stereotyped, language),
                             "anti_stereotyped": fill_template(template, fill_anti, language),
                             "third": found["third"][pos][k - 1]})
    items_out = pd.DataFrame(made, columns=ITEM_COLUMNS)
    return ItemResult(items_out, pd.DataFrame(failed, columns=FAILED_COLUMNS))


def paraphrase_then_translate(items: pd.DataFrame, paraphraser: Paraphraser, translator: Translator,
                              targets: Sequence[str]) -> ItemResult:
    """Reword the English originals, then translate every rewording (MLA-BiTe's first order).

    Versions are rewordings in the target language: variant "rewording", via
    "<paraphraser>:p<k>><translator>", item_id "<base_id>/<lang>~<model>-p<k>><translator>".
    """
    originals = _originals(items)
    english = paraphrase_items(originals, paraphraser)
    made, failed = [], [english.failed]
    for target in targets:
        item_ids = (english.items["item_id"].str.replace("/en~", f"/{target}~", regex=False)
                    + f">{slug(translator.name)}")
        vias = english.items["via"] + f">{translator.name}"
        translated, failures = translate_fields(english.items, translator, target, fit_to=english.items)
        made.append(translated.assign(language=target, item_id=item_ids.loc[translated.index],
                                      via=vias.loc[translated.index]))
        failed.append(_failure_table(english.items, failures, item_ids, vias, target))
    return _result(made, failed, originals)


def translate_then_paraphrase(items: pd.DataFrame, translator: Translator, paraphraser: Paraphraser,
                              targets: Sequence[str]) -> ItemResult:
    """Translate the English originals, then reword each translation in its language (the second order).

    Versions: variant "rewording", via "<translator>><paraphraser>:p<k>", item_id
    "<base_id>/<lang>~<translator>><model>-p<k>".
    """
    originals = _originals(items)
    translated = translate_items(originals, translator, targets)
    reworded = paraphrase_items(translated.items, paraphraser)
    prefix = f"{translator.name}>"
    items_out = reworded.items.assign(
        via=prefix + reworded.items["via"],
        item_id=reworded.items["item_id"].str.replace("~", f"~{slug(translator.name)}>", n=1, regex=False))
    failures = reworded.failed.assign(via=prefix + reworded.failed["via"])
    return _result([items_out], [translated.failed, failures], originals)
