"""Languages the translators know: names for prompts, codes per model family, scripts.

A reply written in another script than its language's has failed (`script_share`)."""

from __future__ import annotations

import re

LANGUAGE_NAMES: dict[str, str] = {
    "ar": "Arabic", "bn": "Bengali", "ca": "Catalan", "de": "German", "el": "Greek", "en": "English", "es": "Spanish",
    "fa": "Persian", "fi": "Finnish", "fr": "French", "he": "Hebrew", "hi": "Hindi", "id": "Indonesian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "lb": "Luxembourgish", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ru": "Russian", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "zh": "Chinese (Simplified)",
}

# FLORES-200 codes used by NLLB-200 (language + script).
NLLB_CODES: dict[str, str] = {
    "ar": "arb_Arab", "bn": "ben_Beng", "ca": "cat_Latn", "de": "deu_Latn", "el": "ell_Grek", "en": "eng_Latn",
    "es": "spa_Latn", "fa": "pes_Arab", "fi": "fin_Latn", "fr": "fra_Latn", "he": "heb_Hebr",
    "hi": "hin_Deva", "id": "ind_Latn", "it": "ita_Latn", "ja": "jpn_Jpan", "ko": "kor_Hang", "lb": "ltz_Latn",
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
    "Latin": ("A-Za-z\u00c0-\u024f\u1e00-\u1eff", "ca de en es fi fr id it lb nl pl pt sv sw tr vi"),
}
SCRIPT_OF: dict[str, str] = {lang: script for script, (_, langs) in SCRIPTS.items() for lang in langs.split()}

def language_name(code: str) -> str:
    """English name of an ISO 639-1 code, for prompts (the code itself when unknown)."""
    return LANGUAGE_NAMES.get(code, code)


def language_label(code: str) -> str:
    """"Hindi (hi)": how the book's prose names a language, so that a reader finds it by name or by code."""
    name = LANGUAGE_NAMES.get(code)
    return f"{name.split(' (')[0]} ({code})" if name else code


def script_share(text: str, language: str) -> float | None:
    """Share of the letters of `text` written in the script of `language` (None: script unknown)."""
    script = SCRIPT_OF.get(language)
    letters = [c for c in text if c.isalpha()]
    if script is None or not letters:
        return None
    pattern = re.compile(f"[{SCRIPTS[script][0]}]")
    return sum(bool(pattern.match(c)) for c in letters) / len(letters)
