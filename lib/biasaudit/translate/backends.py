"""Translation backends behind one interface, `Translator.translate(texts, source, target)`.

`Seq2SeqTranslator` (transformers NLLB-200, M2M100, Marian; each with its own language codes),
`ChatTranslator` (an instruction-tuned causal LM through its chat template, with this project's
prompts and the cleaning rules of `biasaudit.translate.cleaning`) and `TableTranslator` (human
translations from an item bank). Models load lazily, so importing this module loads no torch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from biasaudit.data.languages import ISO_639_3, NLLB_CODES, language_name
from biasaudit.lm.generate import GenerationSettings, Generator, LocalGenerator
from biasaudit.lm.registry import OFFLINE_MODELS, default_device, resolve_dtype
from biasaudit.run.engine import RayOptions
from biasaudit.translate.cache import CachedTextMap, Outcome, prompt_version
from biasaudit.translate.cleaning import END_OF_REPLY, clean_reply, validate_output

TEXT_FIELDS: tuple[str, ...] = ("context", "stereotyped", "anti_stereotyped", "third")


def slug(name: str) -> str:
    """A model name shortened for item ids: the last path part that is left once `{source}`/`{target}`
    patterns are removed, in [A-Za-z0-9._-] only."""
    parts = [re.sub(r"[^A-Za-z0-9._-]+", "-", re.sub(r"\{\w+\}", "", part)).strip("-.") for part in name.split("/")]
    parts = [re.sub(r"-{2,}", "-", part) for part in parts if any(c.isalnum() for c in part)]
    return parts[-1] if parts else "model"


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

    def __init__(self, model: str, *, device: str | None = None, dtype: str = "float32", num_beams: int = 1,
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


        path = self.model_name(source, target)
        if path not in self._loaded:
            device = self.device or default_device()
            tokenizer = AutoTokenizer.from_pretrained(path)
            network = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=resolve_dtype(self.dtype, device))
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


def chat_model(model: str, *, network=None, tokenizer=None, device: str | None = None,
               dtype: str = "float32", executor: RayOptions | None = None) -> Generator:
    """The chat model a translator, paraphraser or judge talks to: greedy, through its chat template.
    `network`/`tokenizer` may be passed already loaded; `dtype` as the params' `generation_dtype`;
    `executor` (the params' Ray pool, `RayOptions.from_params`) splits its conversations over Ray actors."""
    local = LocalGenerator(model, GenerationSettings(dtype=dtype), chat=True, device=device, network=network,
                           tokenizer=tokenizer)
    if executor is None:
        return local
    from biasaudit.run.ray_executor import RayGenerator  # the optional extra

    return RayGenerator(local, executor, device=device)


def chat_replies(chat: Generator, conversations: list[list[dict]], *, max_new_tokens: int) -> list[str]:
    """The replies, with END_OF_REPLY at the end of those the model ended itself: cleaning can then
    tell an unfinished translation (cut off by the token limit) from a finished one."""
    return [text + END_OF_REPLY if ended else text
            for text, ended in chat.converse(conversations, max_new_tokens=max_new_tokens)]


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


class ChatTranslator(Translator):
    """An instruction-tuned causal LM as a translator, prompted through its chat template.

    Replies go through `clean_reply`; one that cannot be cleaned is failed (None), never used.
    The prompt's version is part of the cache key, so editing the prompt retranslates.
    """

    backend = "chat"

    def __init__(self, model: str, *, network=None, tokenizer=None, device: str | None = None, dtype: str = "float32",
                 batch_size: int = 8, max_new_tokens: int = 200, cache: str | Path | bool | None = None,
                 progress: bool = True, executor: RayOptions | None = None):
        super().__init__(model, batch_size=batch_size, cache=cache, progress=progress)
        self.chat = chat_model(model, network=network, tokenizer=tokenizer, device=device, dtype=dtype,
                               executor=executor)
        self.max_new_tokens = max_new_tokens

    def settings(self) -> dict:
        return {"prompt": prompt_version(TRANSLATE_SYSTEM), "max_new_tokens": self.max_new_tokens}

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        budget = min(self.max_new_tokens, 2 * max(self.chat.tokens(texts)) + 16)
        return chat_replies(self.chat, [translation_prompt(t, source, target) for t in texts], max_new_tokens=budget)

    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        return clean_reply(raw, text, source, target, finished=END_OF_REPLY in raw)


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
    (`biasaudit.lm.registry.OFFLINE_MODELS`) are chat models.
    """
    if name == "human" or kind == "table":
        if items is None:
            raise ValueError("the human translator needs the item bank: make_translator('human', items=...)")
        return TableTranslator(items, name=name)
    if kind == "auto":

        if name in OFFLINE_MODELS:
            kind = "chat"
        else:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(name.format(source="en", target="de"))
            kind = "seq2seq" if getattr(config, "is_encoder_decoder", False) else "chat"
    if kind == "seq2seq":
        options.pop("executor", None)  # a seq2seq model translates in this process
        return Seq2SeqTranslator(name, **options)
    if kind == "chat":
        return ChatTranslator(name, **options)
    raise ValueError(f"translator kind {kind!r}: use 'auto', 'seq2seq', 'chat' or 'table'")


