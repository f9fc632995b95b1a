"""Cleaning and validating model output: from a chat model's reply to a usable translation.

Every rule is covered by a table test (tests/test_translate.py); a reply the rules cannot turn
into one translation is failed, never used.
"""

from __future__ import annotations

import re
from collections import Counter

from biasaudit.data.item_table import NO_SPACE_LANGUAGES, normalise
from biasaudit.data.languages import SCRIPT_OF, language_name, script_share
from biasaudit.translate.cache import Outcome

PLACEHOLDER = re.compile(r"\{[A-Z][A-Z0-9_]*\}")
SENTENCE_END = ".!?。！？؟।…\"'”’»)"
QUESTION_MARKS = ("?", "？", "؟")


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


def _most_repeated(text: str, language: str) -> int:
    """How often the most frequent run of 3 words (4 characters where words are not spaced) occurs."""
    tokens = list(text.casefold()) if language in NO_SPACE_LANGUAGES or language == "ja" else text.casefold().split()
    n = 4 if language in NO_SPACE_LANGUAGES or language == "ja" else 3
    grams = Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return max(grams.values(), default=0)


def copied_words(candidate: str, text: str) -> str:
    """Two consecutive words of the source, both lower case in it and of three letters or more,
    found consecutive in the candidate ("" if none): a phrase left untranslated ("national math",
    "mango tree"). Capitalised words are left alone: names are kept in translation."""
    source_words = re.findall(r"[^\W\d_]+", text)
    pairs = {(a.casefold(), b.casefold()) for a, b in zip(source_words, source_words[1:])
             if a.islower() and b.islower() and len(a) >= 3 and len(b) >= 3}
    words = [w.casefold() for w in re.findall(r"[^\W\d_]+", candidate)]
    found = [f"{a} {b}" for a, b in zip(words, words[1:]) if (a, b) in pairs]
    return found[0] if found else ""


def validate_output(candidate: str, text: str, source: str, target: str) -> str:
    """Why `candidate` cannot be used as the translation of `text` ("" when it can).

    The checks: empty; a refusal; `{PLACEHOLDER}` markers changed; the source text returned or
    repeated (three words or more, when the languages differ); source words left untranslated
    (`copied_words`, when the languages differ); far longer than a translation can be; a decoding
    loop (a run of three words three times, where the text has none); a question that is no longer
    a question; written in the wrong script. These catch replies that are not translations; a
    fluent reply in the right language that means something else passes them, and is the
    embedding judge's to catch (`biasaudit.translate.judge`).
    """
    if not candidate.strip():
        return "empty"
    if _REFUSAL.match(candidate) and not _REFUSAL.match(text):
        return "refusal"
    if Counter(PLACEHOLDER.findall(candidate)) != Counter(PLACEHOLDER.findall(text)):
        return "placeholders changed"
    if source != target and len(text.split()) >= 3 and normalise(text) in normalise(candidate):
        return "source text returned untranslated"
    copied = copied_words(candidate, text) if source != target else ""
    if copied:
        return f"source words left untranslated ({copied!r})"
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
