"""Asking chat models: local transformers models and OpenAI-compatible servers, with a reply cache.

- `LocalGenerator`: a causal LM through transformers, the one class that loads a model for
  generation (the template tests ask it prompts; translators, paraphrasers and the LLM judge hold
  whole conversations with it through `converse`). A model with a chat template (an instruction
  model such as SmolLM2-135M-Instruct) gets each prompt as one user message; a base model (Gemma-3-
  270M) gets the plain prompt. Greedy decoding is batched with left padding and stops at the end of
  the turn; with a temperature above 0 each prompt is sampled alone from a generator seeded by
  (seed, prompt, attempt), so a reply does not depend on which prompts shared its batch.
- `OpenAIGenerator`: `POST {base_url}/chat/completions` of a server that speaks the OpenAI API
  (vLLM, TGI, Ollama, llama.cpp), through httpx (`lm.openai_http`: one client, timeouts, retries with
  backoff on no answer, 429 and 5xx). The key comes from an environment variable and is never logged
  or stored. A request that still fails, or an error reply, is returned as a `GenerationError` for
  that prompt (it counts as unprocessable and is retried by the template tests), never raised.
- `ask`: the prompts not yet answered go to the model in batches with a progress bar; every batch
  is stored in an on-disk cache keyed by (backend, model, settings, prompt, attempt) as soon as it is
  answered, so a killed run asks nothing twice. Errors are not cached.

LangBiTe (since Feb 2025) never sends its temperature and token settings (docs/langbite.md §1.3); here
they are always sent.
"""

from __future__ import annotations

import json
import zlib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from biasaudit.core.keyvalue import KeyValueStore, cache_file, cache_key
from biasaudit.core.options import DEFAULT_SEED
from biasaudit.lm import openai_http as http
from biasaudit.lm.registry import (
    OFFLINE_MODELS,
    default_device,
    load_model,
    resolve_dtype,
    resolve_model_path,
)


@dataclass(frozen=True)
class GenerationSettings:
    """What changes a reply besides the model and the prompt (part of the cache key)."""

    max_new_tokens: int = 32
    temperature: float = 0.0
    seed: int = DEFAULT_SEED
    dtype: str = "float32"  # the weights' precision for a local model ("auto": see models.resolve_dtype)


@dataclass(frozen=True)
class GenerationError:
    """A prompt that got no reply (network error, timeout, error reply): unprocessable."""

    reason: str


class Generator(ABC):
    """Prompts → replies, one per prompt, in order; `GenerationError` where no reply came."""

    backend: str = "?"

    def __init__(self, name: str, settings: GenerationSettings):
        self.name = name
        self.settings = settings

    @abstractmethod
    def generate(self, prompts: list[str], attempt: int = 1, max_new_tokens: int | None = None
                 ) -> list[str | GenerationError]:
        """Replies to a batch of prompts (at most `max_new_tokens` each, default the settings')."""

    def describe(self) -> dict:
        return {"backend": self.backend, "model": self.name, **asdict(self.settings)}

    def lengths(self, prompts: Sequence[str]) -> list[int]:
        """A size per prompt to batch similar ones together (UTF-8 bytes: close to the token count of
        byte-level tokenizers)."""
        return [len(p.encode()) for p in prompts]

    def tokens(self, texts: Sequence[str]) -> list[int]:
        """How many tokens a reply needs to spell each text (an upper bound: UTF-8 bytes)."""
        return [len(t.encode()) for t in texts]


class LocalGenerator(Generator):
    """A transformers causal LM on this machine (`model`: hub id, folder or offline short name)."""

    backend = "transformers"

    def __init__(self, model: str, settings: GenerationSettings = GenerationSettings(), *, chat: bool | None = None,
                 device: str | None = None, network=None, tokenizer=None):
        super().__init__(model, settings)
        self._network, self._tokenizer = network, tokenizer
        self.device = device
        self._chat = chat
        self._stops: list[int] | None = None

    def _load(self):
        if self._network is None:
            device = self.device or default_device()
            self._network, self._tokenizer = load_model(self.name, device=device,
                                                        dtype=resolve_dtype(self.settings.dtype, device))
        return self._network, self._tokenizer

    def describe(self) -> dict:
        """What the replies depend on: the settings with the precision actually used (the loaded
        model's, or the one `_load` will load it in: a run whose replies are all cached never
        loads the model)."""
        if self._network is not None:
            dtype = next(self._network.parameters()).dtype
        else:
            dtype = resolve_dtype(self.settings.dtype, self.device or default_device())
        return {**super().describe(), "dtype": str(dtype).removeprefix("torch."), "chat": self.chat,
                "cut_replies": "whole characters"}

    def _tokenizer_only(self):
        """The tokenizer, without loading the model's weights when they are not loaded yet."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(self.name))
        return self._tokenizer

    @property
    def chat(self) -> bool:
        """Whether prompts go through the chat template: the offline registry says so for its models;
        otherwise, whether the tokenizer has one."""
        if self._chat is None:

            if self.name in OFFLINE_MODELS:
                self._chat = OFFLINE_MODELS[self.name].chat
            else:
                self._chat = bool(getattr(self._load()[1], "chat_template", None))
        return self._chat

    def texts(self, prompts: Sequence[str]) -> list[str]:
        """What the model reads for each prompt (chat template, or the prompt and a newline)."""
        tokenizer = self._tokenizer_only()
        if self.chat:
            return [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                  add_generation_prompt=True) for p in prompts]
        return [p + "\n" for p in prompts]

    def lengths(self, prompts: Sequence[str]) -> list[int]:
        """Token counts of what the model reads: batches of equal length pad nothing."""
        tokenizer = self._tokenizer_only()
        return [len(ids) for ids in tokenizer(self.texts(prompts), add_special_tokens=not self.chat)["input_ids"]]

    def tokens(self, texts: Sequence[str]) -> list[int]:
        tokenizer = self._tokenizer_only()
        return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def _stop_ids(self) -> list[int]:
        """The model's end-of-turn ids, found once per generator: `get_vocab()` builds the whole
        vocabulary (262k entries for Gemma, seconds per call)."""
        if self._stops is None:
            network, tokenizer = self._load()
            ids = network.generation_config.eos_token_id
            ids = list(ids) if isinstance(ids, (list, tuple)) else [ids] if ids is not None else []
            vocabulary = tokenizer.get_vocab()
            ids += [vocabulary[marker] for marker in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>", "</s>")
                    if marker in vocabulary]
            self._stops = sorted(set(int(i) for i in ids if i is not None))
        return self._stops

    def generate(self, prompts: list[str], attempt: int = 1, max_new_tokens: int | None = None
                 ) -> list[str | GenerationError]:
        seeds = [json.dumps([self.settings.seed, prompt, attempt]) for prompt in prompts]
        return [text.strip() for text, _ in self._complete(self.texts(prompts), seeds, max_new_tokens)]

    def converse(self, conversations: Sequence[list[dict]], *, max_new_tokens: int | None = None
                 ) -> list[tuple[str, bool]]:
        """Replies to whole conversations (system and user messages, through the chat template), each
        with whether the model ended it itself (False: cut off by the token limit)."""
        tokenizer = self._tokenizer_only()
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"{self.name}: the tokenizer has no chat template; use an instruction-tuned model")
        texts = [tokenizer.apply_chat_template(list(c), tokenize=False, add_generation_prompt=True)
                 for c in conversations]
        seeds = [json.dumps([self.settings.seed, list(c)]) for c in conversations]
        return self._complete(texts, seeds, max_new_tokens, special_tokens=False)

    def _complete(self, texts: list[str], seeds: list[str], max_new_tokens: int | None,
                  special_tokens: bool | None = None) -> list[tuple[str, bool]]:
        """The model's continuation of each text and whether it ended at a stop token. Greedy: one
        batch, left-padded; sampling: one text at a time from a generator seeded by `seeds[i]`."""
        import torch

        network, tokenizer = self._load()
        stops = self._stop_ids()
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
        special = (not self.chat) if special_tokens is None else special_tokens
        groups = [list(range(len(texts)))] if self.settings.temperature == 0 else [[i] for i in range(len(texts))]
        replies: list[tuple[str, bool]] = [("", False)] * len(texts)
        for group in groups:
            encoded = tokenizer([texts[i] for i in group], return_tensors="pt", padding=True, padding_side="left",
                                add_special_tokens=special)
            encoded = {k: v.to(network.device) for k, v in encoded.items()}
            options: dict = {"do_sample": False}
            if self.settings.temperature > 0:
                torch.manual_seed(zlib.crc32(seeds[group[0]].encode()))
                options = {"do_sample": True, "temperature": self.settings.temperature, "top_k": 0, "top_p": 1.0}
            with torch.inference_mode():
                out = network.generate(**encoded, max_new_tokens=max_new_tokens or self.settings.max_new_tokens,
                                       eos_token_id=stops, pad_token_id=pad, **options)
            for i, row in zip(group, out[:, encoded["input_ids"].shape[1]:].tolist()):
                end = next((k for k, token in enumerate(row) if token in stops), None)
                replies[i] = (reply_text(tokenizer, row[:end], finished=end is not None), end is not None)
        return replies


def reply_text(tokenizer, tokens: list[int], *, finished: bool) -> str:
    """The reply the tokens spell. One cut at the token limit (not `finished`) can end inside a character,
    a byte-level token holding only part of its UTF-8 bytes, which decodes to U+FFFD: it keeps whole
    characters only."""
    text = tokenizer.decode(tokens, skip_special_tokens=True)
    return text if finished else text.rstrip("\ufffd")


class OpenAIGenerator(Generator):
    """A model served behind an OpenAI-compatible HTTP API (`base_url` such as http://host:8000/v1)."""

    backend = "openai"

    def __init__(self, model: str, base_url: str, settings: GenerationSettings = GenerationSettings(), *,
                 api_key_env: str = "OPENAI_API_KEY", timeout: float = 60.0, retries: int = 2, backoff_s: float = 1.0):
        super().__init__(model, settings)
        self.base_url = base_url.rstrip("/")
        self.retries, self.backoff_s = retries, backoff_s
        self._client = http.client(api_key_env=api_key_env, timeout=timeout)

    def describe(self) -> dict:
        return {**super().describe(), "base_url": self.base_url}  # the key is never part of it

    def _one(self, prompt: str, attempt: int, max_new_tokens: int | None) -> str | GenerationError:
        body = {"model": self.name, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_new_tokens or self.settings.max_new_tokens, "temperature": self.settings.temperature,
                "seed": self.settings.seed + attempt - 1}
        try:
            content = http.post_json(self._client, f"{self.base_url}/chat/completions", body, retries=self.retries,
                                     backoff_s=self.backoff_s)
            reply = content["choices"][0]["message"]["content"]
        except http.HTTPFailure as err:
            return GenerationError(str(err))
        except (KeyError, IndexError, TypeError) as err:
            return GenerationError(f"not an OpenAI chat completion ({type(err).__name__}: {err})")
        if not isinstance(reply, str):
            return GenerationError("the reply has no text")
        return reply

    def generate(self, prompts: list[str], attempt: int = 1, max_new_tokens: int | None = None
                 ) -> list[str | GenerationError]:
        return [self._one(p, attempt, max_new_tokens) for p in prompts]


def reply_cache(path: str | Path | None = None) -> KeyValueStore:
    """The on-disk reply cache (default: <cache_dir>/replies.sqlite)."""

    return KeyValueStore(Path(path) if path else cache_file("replies"))


def ask(generator: Generator, prompts: Sequence[str], *, cache: KeyValueStore | None = None, attempt: int = 1,
        max_new_tokens: int | None = None, batch_size: int = 16, progress: bool = True) -> list[str | GenerationError]:
    """One reply per prompt; repeated prompts are asked once, cached replies are not asked again.

    The attempt number is part of the cache key only when sampling (a greedy reply is the same at
    every attempt). Prompts are batched by length, longest first, so batches pad little.
    """
    description = {**generator.describe(), "max_new_tokens": max_new_tokens or generator.settings.max_new_tokens}
    keyed_attempt = attempt if generator.settings.temperature > 0 else 1
    distinct = list(dict.fromkeys(prompts))
    keys = {p: cache_key("reply", description, p, keyed_attempt) for p in distinct}
    found = cache.get_many(list(keys.values())) if cache is not None else {}
    replies: dict[str, str | GenerationError] = {p: str(found[k]) for p, k in keys.items() if k in found}
    todo = [p for p in distinct if p not in replies]
    if todo:
        sizes = dict(zip(todo, generator.lengths(todo)))
        todo.sort(key=lambda p: sizes[p], reverse=True)
    bar = tqdm(total=len(todo), desc=f"asking {generator.name}", unit="prompt", disable=not progress or not todo)
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        answers = generator.generate(batch, attempt, max_new_tokens)
        replies.update(zip(batch, answers))
        if cache is not None:
            cache.put_many((keys[p], a) for p, a in zip(batch, answers) if isinstance(a, str))
        bar.update(len(batch))
    bar.close()
    return [replies[p] for p in prompts]
