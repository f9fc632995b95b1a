"""How one model's items are scored, the same in this process and in a Ray actor: the params'
engine (transformers, vLLM or a completions server), checked before its first item."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pandas as pd

from biasaudit.core.store import ScoreStore, run_lock
from biasaudit.lm.completions import CompletionsEngine
from biasaudit.lm.engines import (
    PromptLogprobEngine,
    check_declared_precision,
    check_engine,
    check_prompts,
    precision_label,
    score_chunk,
    score_with_engine,
)
from biasaudit.lm.registry import load_model, load_tokenizer, scoring_dtype


def vllm_dtype(dtype: str) -> str:
    """The precision the vLLM engine runs in for the params' scoring_dtype ("auto": bf16)."""
    return "bfloat16" if dtype == "auto" else dtype


@dataclass(frozen=True)
class EngineSpec:
    """The params that decide how a model scores (`ExecutionParams` and `ScoringParams` keys)."""

    engine: Literal["transformers", "vllm", "completions"] = "transformers"
    url: str = ""
    key_env: str = "OPENAI_API_KEY"
    served_names: tuple[tuple[str, str], ...] = ()  # (model, the name its server knows it by)
    server_precision: str = ""  # what the completions server computes in, as declared ("": not declared)
    eager: bool = False  # vLLM without graph compilation
    check: Literal["transformers", "self"] = "transformers"
    tolerance: float = 0.5
    max_model_len: int = 4096
    dtype: str = "auto"
    device: str | None = None
    batch_size: int | Literal["auto"] = 16

    @property
    def reused_precision(self) -> str | None:
        """The precision stored rows must have to be reused (None: any): a transformers run that names a
        precision, the vLLM engine (always in a known one) and a completions server whose precision is
        declared score rows of another precision again, so that no model's scores mix them silently."""
        if self.engine == "vllm":
            return precision_label("vllm", vllm_dtype(self.dtype))
        if self.engine == "completions":
            return precision_label("completions", self.server_precision) if self.server_precision else None
        return None if self.dtype == "auto" else self.dtype

    def served_name(self, model: str) -> str:
        return dict(self.served_names).get(model, model)

    @classmethod
    def from_params(cls, params) -> "EngineSpec":
        return cls(engine=params.engine, url=params.engine_url, key_env=params.engine_key_env,
                   served_names=tuple(sorted(params.engine_served_names.items())),
                   server_precision=params.engine_precision, eager=params.vllm_eager,
                   check=params.engine_check, tolerance=params.engine_tolerance, max_model_len=params.max_model_len,
                   dtype=params.scoring_dtype, device=params.device_or_none, batch_size=params.batch_size)


class ModelScorer:
    """One model, loaded (or connected to) once, scoring any number of item chunks; a Ray actor holds one."""

    def __init__(self, model: str, spec: EngineSpec):
        self.model, self.spec = model, spec
        self._loaded = None  # (network, tokenizer) for transformers
        self._engine: PromptLogprobEngine | None = None
        self._tokenizer = None
        self.check: pd.DataFrame | None = None

    def _transformers(self):
        if self._loaded is None:
            self._loaded = load_model(self.model, device=self.spec.device, dtype=scoring_dtype(self.spec.dtype))
        return self._loaded

    def engine(self) -> tuple[PromptLogprobEngine, object]:
        """The params' engine and the model's tokenizer, checked before first use (`engines.check_engine`)."""
        if self._engine is None:
            spec = self.spec
            self._tokenizer = load_tokenizer(self.model)
            reference = self._reference() if spec.check == "transformers" else None
            if spec.engine == "vllm":
                from biasaudit.lm.vllm_engine import VLLMEngine  # not a dependency: a CUDA install, or `make vllm`

                engine: PromptLogprobEngine = VLLMEngine(self.model, dtype=vllm_dtype(spec.dtype),
                                                         max_model_len=spec.max_model_len, eager=spec.eager)
            else:
                engine = CompletionsEngine(self.model, spec.url, api_key_env=spec.key_env,
                                           served_name=spec.served_name(self.model),
                                           precision=spec.server_precision)
            self.check = check_engine(engine, self._tokenizer, tolerance=spec.tolerance, reference=reference)
            if reference is not None:
                check_declared_precision(engine, self.check)
            self._engine = engine
        return self._engine, self._tokenizer

    def _reference(self):
        """The check sentences' log-probs by transformers in fp32, computed before the engine starts (vLLM
        takes most of a GPU's memory) and the model released at once."""
        from biasaudit.lm.scoring import prompt_logprobs, release

        network, _ = load_model(self.model, device=self.spec.device, dtype=scoring_dtype("float32"))
        try:
            return prompt_logprobs(network, [p[0] for p in check_prompts(self._tokenizer)])
        finally:
            release(network)

    def load(self) -> None:
        """Load the model (or start and check the engine) now, not at the first item."""
        if self.spec.engine == "transformers":
            self._transformers()
        else:
            self.engine()

    def precision(self) -> str:
        if self.spec.engine != "transformers":
            return self.engine()[0].precision()
        return str(next(self._transformers()[0].parameters()).dtype).removeprefix("torch.")

    def score(self, items: pd.DataFrame, *, scorer_boundary: bool = False, store: ScoreStore | None = None,
              progress: bool = True) -> pd.DataFrame:
        """The scores table of `items`, resuming from `store` when given (`scoring.score`'s contract)."""
        if self.spec.engine == "transformers":
            from biasaudit.lm.scoring import score

            return score(items, self._transformers(), model_name=self.model, batch_size=self.spec.batch_size,
                         scorer_boundary=scorer_boundary, store=store, progress=progress)
        engine, tokenizer = self.engine()
        if store is None:
            return score_chunk(items.reset_index(drop=True), engine, tokenizer, model_name=self.model,
                               scorer_boundary=scorer_boundary)
        with run_lock(store.run_folder):
            return score_with_engine(items, engine, tokenizer, model_name=self.model, scorer_boundary=scorer_boundary,
                                     store=store, progress=progress)


@dataclass(frozen=True)
class RayOptions:
    """The Ray pool of a run (`executor: ray`): actors, their resources, the shards they get."""

    actors: int = 0
    gpus_per_actor: float | None = None
    cpus_per_actor: float = 1.0
    shard_items: int = 64
    shard_retries: int = 2

    @classmethod
    def from_params(cls, params) -> "RayOptions | None":
        """The params' pool, or None when the run's executor is local."""
        if params.executor != "ray":
            return None
        return cls(actors=params.ray_actors, gpus_per_actor=params.ray_gpus_per_actor,
                   cpus_per_actor=params.ray_cpus_per_actor, shard_items=params.shard_items,
                   shard_retries=params.shard_retries)
