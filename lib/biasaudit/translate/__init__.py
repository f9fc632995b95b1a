"""Translating and rewording items (the MLA-BiTe method): one interface over several translators.

Every translator answers `translate(texts, source, target)` with one translation per text, or
None where it failed (a failed translation is never used). The package, by idea:

- `cache`: the on-disk text cache shared with `biasaudit.translate.judge` (raw outputs keyed by backend,
  model, settings, languages and text; cleaning runs on every read);
- `cleaning`: turning a chat model's reply into one usable translation, or a failure;
- `backends`: `Seq2SeqTranslator` (NLLB-200, M2M100, Marian), `ChatTranslator` (instruction LLMs
  through their chat template), `TableTranslator` (human translations from a bank);
- `versions`: item versions, field by field (`translate_items`), and English round trips;
- `paraphrase`: LLM paraphrasing in both orders with translation.

The names below are the package's public interface.
"""

from biasaudit.translate.backends import (
    TEXT_FIELDS,
    TRANSLATE_SYSTEM,
    ChatTranslator,
    Seq2SeqTranslator,
    TableTranslator,
    Translator,
    chat_model,
    chat_replies,
    detect_family,
    make_translator,
    slug,
    translation_prompt,
)
from biasaudit.translate.cache import (
    CachedTextMap,
    KeyValueStore,
    Outcome,
    cache_key,
    default_cache_path,
    prompt_version,
)
from biasaudit.translate.cleaning import (
    END_OF_REPLY,
    PLACEHOLDER,
    clean_reply,
    copied_words,
    fit_fragment,
    strip_end_markers,
    unwrap,
    validate_output,
)
from biasaudit.translate.paraphrase import (
    Paraphraser,
    contrast_template,
    fill_template,
    grammatical_number,
    paraphrase_items,
    paraphrase_prompt,
    paraphrase_then_translate,
    parse_paraphrases,
    translate_then_paraphrase,
)
from biasaudit.translate.versions import (
    FAILED_COLUMNS,
    ItemResult,
    RoundTrip,
    round_trip,
    translate_fields,
    translate_items,
    unchanged_share,
)

__all__ = [
    "CachedTextMap", "ChatTranslator", "END_OF_REPLY", "FAILED_COLUMNS", "ItemResult",
    "KeyValueStore", "Outcome", "PLACEHOLDER", "Paraphraser", "RoundTrip",
    "Seq2SeqTranslator", "TEXT_FIELDS", "TRANSLATE_SYSTEM", "TableTranslator", "Translator",
    "cache_key", "chat_model", "chat_replies", "clean_reply", "copied_words", "contrast_template", "default_cache_path", "detect_family", "fill_template",
    "fit_fragment", "grammatical_number", "make_translator", "paraphrase_items",
    "paraphrase_prompt", "paraphrase_then_translate", "parse_paraphrases", "prompt_version", "round_trip",
    "slug", "strip_end_markers", "translate_fields", "translate_items",
    "translate_then_paraphrase", "translation_prompt", "unchanged_share", "unwrap", "validate_output",
]
