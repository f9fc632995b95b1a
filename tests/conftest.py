"""Shared fixtures: tiny causal LMs with random weights and tokenizers trained on the fly."""

from __future__ import annotations

import os

import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CORPUS = [
    "The nurse said that she was tired.",
    "The engineer said that he was tired.",
    "The doctor said that she would come back.",
    "The pilot said that he would come back.",
    "My grandmother cannot use a phone.",
    "My grandson cannot use a phone.",
    "护士说她累了。",
    "工程师说他累了。",
    "护士说她会回来。",
    "La enfermera dijo que ella estaba cansada.",
] * 20


def train_tokenizer(add_bos: bool) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on a small corpus; `add_bos` decides whether it adds <s>."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    if add_bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
        )
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def tiny_model(vocab_size: int, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    model = LlamaForCausalLM(config)
    model.eval()
    return model


@pytest.fixture(scope="session")
def tiny_lm():
    """(model, tokenizer) whose tokenizer adds no start token, like SmolLM2's."""
    tokenizer = train_tokenizer(add_bos=False)
    return tiny_model(len(tokenizer)), tokenizer


@pytest.fixture(scope="session")
def tiny_lm_with_bos():
    tokenizer = train_tokenizer(add_bos=True)
    return tiny_model(len(tokenizer), seed=1), tokenizer


def item(item_id: str, context: str, stereotyped: str, anti: str, third: str, language: str = "en",
         variant: str | None = None) -> dict:
    base = item_id.split("/")[0]
    return {
        "item_id": item_id, "base_id": base, "source": "written", "dimension": "gender", "category": "pronoun",
        "language": language, "variant": variant or ("original" if language == "en" else "translation"),
        "via": "human", "context": context, "stereotyped": stereotyped, "anti_stereotyped": anti,
        "third": third, "third_kind": "unrelated",
    }


@pytest.fixture
def small_items() -> pd.DataFrame:
    return pd.DataFrame([
        item("a/en", "The nurse said that", "she was tired.", "he was tired.", "the sky is green."),
        item("a/zh", "护士说", "她累了。", "他累了。", "天空是绿色的。", language="zh"),
        item("b/en", "", "Nurses are kind.", "Nurses are cruel.", "Mango."),
        item("c/en", "My grandmother cannot", "use a phone.", "fix a phone.", "sing."),
        item("d/en", "The pilot said that he would come back and that the engineer", "agreed.", "disagreed.",
             "was."),
        item("e/es", "La enfermera dijo que", "ella estaba cansada.", "él estaba cansado.", "el mango.",
             language="es"),
    ])


@pytest.fixture(scope="session")
def offline_cache(tmp_path_factory):
    """Keep converted offline models in the user's cache (conversion takes tens of seconds)."""
    return os.environ.get("BIASAUDIT_CACHE_DIR")
