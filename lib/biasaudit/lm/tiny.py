"""Tiny causal language models made on the spot: random weights, a tokenizer trained in a second.

They exist for tests and for the quick CI run of the book (`params/ci.yml`, model `tiny-random`):
every line of the pipeline runs for real, in seconds, with no download. Their scores mean nothing.
"""

from __future__ import annotations

from pathlib import Path

CORPUS: list[str] = [
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


def train_tokenizer(add_bos: bool, corpus: list[str] | None = None, vocab_size: int = 400):
    """A byte-level BPE tokenizer (any text encodes); `add_bos` decides whether it adds <s>, and a
    chat template is set, so the model can also stand in for a chat model."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus or CORPUS, trainer=trainer)
    if add_bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
        )
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
                          "{% if add_generation_prompt %}<s>assistant: {% endif %}")
    return fast


def tiny_model(vocab_size: int, seed: int = 0):
    """A two-layer Llama with random weights, in eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    model = LlamaForCausalLM(config)
    model.eval()
    return model


def save_tiny_model(folder: Path, seed: int = 0) -> Path:
    """A tiny model (no start token, like SmolLM2) saved as an ordinary model folder."""
    tokenizer = train_tokenizer(add_bos=False)
    model = tiny_model(len(tokenizer), seed=seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
