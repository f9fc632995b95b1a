"""The Ray executor (`executor: ray`): a run's shards on a pool of Ray actors, one model per actor.

Optional: `pip install -e '.[ray]'`. `ray.init` joins the cluster named by $RAY_ADDRESS (e.g. one
started with `ray start --head`), else starts a local one.

Scoring: the items each model still lacks in the run's score store are cut into shards of
`shard_items`; a free actor takes the next shard of its own model, or, when its model has none left,
is replaced by an actor of the model with the most shards left. Actors only compute and return a
scores table; the driver alone writes (one writer, under the run's lock, as a local run), each
shard as soon as it comes back, so an interrupted run resumes without scoring what is stored. A
shard whose actor died (a killed process, a lost node) is given to a new actor, at most
`shard_retries` more times; the shards that still fail are named in the error raised once every
other shard is stored. An exception raised by the scoring itself (a bad model, an engine that fails
its check) is not retried: it stops the run, with its message.

Generation (`RayGenerator`): template tests and machine translation send their prompts to the same
kind of pool, each actor holding a `LocalGenerator` (or a vLLM one), split evenly.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd
import ray
from tqdm.auto import tqdm

from biasaudit.core.paths import run_dir
from biasaudit.core.store import (
    DTYPE_COLUMN,
    ScoreStore,
    run_lock,
    scores_for_items,
    stored_scores,
)
from biasaudit.lm.generate import (
    GenerationError,
    GenerationSettings,
    Generator,
    LocalGenerator,
)
from biasaudit.lm.registry import load_tokenizer
from biasaudit.lm.tokens import longest_first
from biasaudit.run.engine import EngineSpec, ModelScorer, RayOptions

ACTOR_DIED = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError)


class ShardError(RuntimeError):
    """Shards that could not be scored after their retries; every other shard is stored."""


@dataclass(frozen=True)
class Shard:
    model: str
    number: int
    items: pd.DataFrame

    @property
    def name(self) -> str:
        ids = self.items["item_id"]
        return f"{self.model} shard {self.number} ({len(ids)} items, {ids.iloc[0]} … {ids.iloc[-1]})"


class ShardScorer:
    """A Ray actor's body: one model (`run.engine.ModelScorer`), loaded at its first shard."""

    def __init__(self, model: str, spec: EngineSpec, scorer_boundary: bool):
        self.scorer = ModelScorer(model, spec)
        self.scorer_boundary = scorer_boundary

    def pid(self) -> int:
        return os.getpid()

    def score(self, items: pd.DataFrame) -> tuple[pd.DataFrame, str, float, float]:
        """(scores, precision, seconds scoring, seconds loading the model: 0 after the first shard)."""
        started = time.perf_counter()
        self.scorer.load()
        loaded = time.perf_counter()
        table = self.scorer.score(items, scorer_boundary=self.scorer_boundary, progress=False)
        return table, self.scorer.precision(), time.perf_counter() - loaded, loaded - started


def connect(*, num_cpus: int | None = None) -> None:
    """Join $RAY_ADDRESS's cluster, else start a local one (once per process)."""
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS") or None
        ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                 logging_level="WARNING", log_to_driver=False)


def pool_size(options: RayOptions, shards: int) -> tuple[int, float]:
    """(actors, GPUs per actor): as the options say, else as many as the cluster's resources allow."""
    resources = ray.cluster_resources()
    gpus = options.gpus_per_actor
    if gpus is None:
        gpus = 1.0 if resources.get("GPU", 0) >= 1 else 0.0
    if gpus > resources.get("GPU", 0) or options.cpus_per_actor > resources.get("CPU", 0):
        # Ray would wait for ever for an actor no node can hold
        raise ValueError(f"an actor asks for {gpus:g} GPU(s) and {options.cpus_per_actor:g} CPU(s), but the Ray cluster "
                         f"has {resources.get('GPU', 0):g} GPU(s) and {resources.get('CPU', 0):g} CPU(s): lower the "
                         "params' ray_gpus_per_actor or ray_cpus_per_actor")
    actors = options.actors
    if actors == 0:
        actors = int(resources.get("GPU", 0) // gpus) if gpus else int(resources.get("CPU", 1) // options.cpus_per_actor)
    return max(1, min(actors, shards)), gpus


def score_on_ray(
    run_name: str,
    items: pd.DataFrame,
    *,
    models: list[str],
    spec: EngineSpec,
    options: RayOptions,
    scorer_boundary: bool = False,
    after_store: Callable[[int, list[int]], None] | None = None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`pipeline.score_run` on a Ray pool: the same (scores, timings), the same store.

    `after_store(n, busy)` is called after each stored shard with the number stored so far and the
    process ids of the actors that have a shard in flight (the tests kill one there)."""
    store = ScoreStore(run_dir(run_name))
    wanted = spec.reused_precision
    timings = {m: {"model": m, "scored_now": 0, "read_back": 0, "seconds": 0.0, "batch_size": spec.batch_size,
                   "load_seconds": 0.0, "engine": spec.engine, "executor": "ray", "actors": 0, "shards_retried": 0}
               for m in models}
    with run_lock(store.run_folder):
        queues: dict[str, deque[Shard]] = {}
        for model in models:
            done = stored_scores(store, model, scorer_boundary, items, wanted)
            todo = items.loc[~items["item_id"].isin(done["item_id"])] if len(done) else items
            if len(todo):  # the order a local run scores in: shards of similar lengths pad little
                todo = todo.iloc[longest_first(todo, load_tokenizer(model), scorer_boundary=scorer_boundary, pack=True,
                                               window=None)]
            queues[model] = deque(Shard(model, k, todo.iloc[start:start + options.shard_items].reset_index(drop=True))
                                  for k, start in enumerate(range(0, len(todo), options.shard_items)))
            timings[model]["read_back"] = len(items) - len(todo)
        if any(queues.values()):
            connect()
            _Pool(queues, spec, options, scorer_boundary, store, timings, after_store, progress).run()
    tables = []
    for model in models:
        done = stored_scores(store, model, scorer_boundary, items, wanted)
        tables.append(scores_for_items(items, done, n_scored=timings[model]["scored_now"], batch_size=spec.batch_size))
    return pd.concat(tables, ignore_index=True), pd.DataFrame(list(timings.values()))


class _Pool:
    """The driver's loop: keep every actor busy, store what comes back, replace what dies."""

    def __init__(self, queues: dict[str, deque[Shard]], spec: EngineSpec, options: RayOptions, scorer_boundary: bool,
                 store: ScoreStore, timings: dict[str, dict], after_store, progress: bool):
        self.queues, self.spec, self.options = queues, spec, options
        self.scorer_boundary, self.store, self.timings, self.after_store = scorer_boundary, store, timings, after_store
        total = sum(len(q) for q in queues.values())
        self.size, self.gpus = pool_size(options, total)
        for timing in timings.values():
            timing["actors"] = self.size
        self.actors: list = [None] * self.size
        self.models: list[str | None] = [None] * self.size
        self.pids: list[int | None] = [None] * self.size
        self.in_flight: dict = {}
        self.tries: dict[tuple[str, int], int] = {}
        self.failed: list[str] = []
        self.stored = 0
        self.bar = tqdm(total=sum(len(s.items) for q in queues.values() for s in q), unit="item", disable=not progress,
                        desc=f"scoring on {self.size} Ray actor(s)")

    def run(self) -> None:
        models = [m for m, q in self.queues.items() if q]
        try:
            for slot in range(self.size):
                self._assign(slot, prefer=models[slot % len(models)])
            while self.in_flight:
                ready, _ = ray.wait(list(self.in_flight), num_returns=1)
                slot, shard = self.in_flight.pop(ready[0])
                try:
                    table, precision, seconds, load_seconds = ray.get(ready[0])
                except ACTOR_DIED as err:
                    self._died(slot, shard, err)
                    continue
                except ray.exceptions.RayTaskError as err:
                    raise RuntimeError(f"scoring {shard.name} failed: {err.cause!r}") from err.cause
                self.store.append(table.assign(**{DTYPE_COLUMN: precision}))
                self.stored += 1
                self.timings[shard.model]["scored_now"] += len(table)
                self.timings[shard.model]["seconds"] += seconds
                self.timings[shard.model]["load_seconds"] += load_seconds
                self.bar.update(len(table))
                if self.after_store is not None:
                    busy = sorted({self.pids[s] for s, _ in self.in_flight.values() if self.pids[s] is not None})
                    self.after_store(self.stored, busy)
                self._assign(slot)
        finally:
            self.bar.close()
            for actor in self.actors:
                if actor is not None:
                    ray.kill(actor)
        if self.failed:
            raise ShardError(f"{len(self.failed)} shard(s) could not be scored: their actor died "
                             f"{self.options.shard_retries + 1} times: {'; '.join(self.failed)}. Every other shard is "
                             "stored; run again to retry these.")

    def _died(self, slot: int, shard: Shard, err: Exception) -> None:
        key = (shard.model, shard.number)
        self.tries[key] = self.tries.get(key, 0) + 1
        self.actors[slot] = self.models[slot] = self.pids[slot] = None
        if self.tries[key] <= self.options.shard_retries:
            self.timings[shard.model]["shards_retried"] += 1
            self.queues[shard.model].appendleft(shard)
        else:
            self.failed.append(f"{shard.name} ({type(err).__name__})")
        self._assign(slot, prefer=shard.model)

    def _assign(self, slot: int, prefer: str | None = None) -> None:
        """Give the slot's actor its next shard, replacing the actor when another model has the work."""
        current = prefer or self.models[slot]
        model = current if current and self.queues.get(current) else max(
            (m for m in self.queues if self.queues[m]), key=lambda m: len(self.queues[m]), default=None)
        if model is None:
            if self.actors[slot] is not None:
                ray.kill(self.actors[slot])
            self.actors[slot] = self.models[slot] = self.pids[slot] = None
            return
        if self.models[slot] != model or self.actors[slot] is None:
            if self.actors[slot] is not None:
                ray.kill(self.actors[slot])
            actor = ray.remote(ShardScorer).options(
                num_cpus=self.options.cpus_per_actor, num_gpus=self.gpus, max_restarts=0, max_task_retries=0,
            ).remote(model, self.spec, self.scorer_boundary)
            self.actors[slot], self.models[slot] = actor, model
            self.pids[slot] = ray.get(actor.pid.remote())
        shard = self.queues[model].popleft()
        self.in_flight[self.actors[slot].score.remote(shard.items)] = (slot, shard)


class GeneratorActor:
    """A Ray actor's body for generation: one chat model, loaded at its first prompt."""

    def __init__(self, model: str, settings: GenerationSettings, engine: str, device: str | None, max_model_len: int):
        self.model, self.settings, self.engine = model, settings, engine
        self.device, self.max_model_len = device, max_model_len
        self._generator = None

    def _get(self):
        if self._generator is None:
            if self.engine == "vllm":
                from biasaudit.lm.vllm_engine import VLLMGenerator  # the optional extra

                self._generator = VLLMGenerator(self.model, self.settings, max_model_len=self.max_model_len)
            else:
                self._generator = LocalGenerator(self.model, self.settings, device=self.device)
        return self._generator

    def generate(self, prompts: list[str], attempt: int, max_new_tokens: int | None) -> list:
        return self._get().generate(prompts, attempt, max_new_tokens)

    def converse(self, conversations: list[list[dict]], max_new_tokens: int | None) -> list:
        return self._get().converse(conversations, max_new_tokens=max_new_tokens)


class RayGenerator(Generator):
    """A generator whose prompts are split over a pool of Ray actors, each holding the same model.
    It describes itself as the generator it stands for (`local`), so replies share one cache."""

    def __init__(self, local: Generator, options: RayOptions, *, engine: str = "transformers",
                 device: str | None = None, max_model_len: int = 4096):
        super().__init__(local.name, local.settings)
        self.local, self.backend = local, local.backend
        connect()
        size, gpus = pool_size(options, shards=10**6)
        self.actors = [ray.remote(GeneratorActor).options(num_cpus=options.cpus_per_actor, num_gpus=gpus).remote(
            local.name, local.settings, engine, device, max_model_len) for _ in range(size)]

    def describe(self) -> dict:
        return self.local.describe()

    def lengths(self, prompts: Sequence[str]) -> list[int]:
        return self.local.lengths(prompts)

    def tokens(self, texts: Sequence[str]) -> list[int]:
        return self.local.tokens(texts)

    def _split(self, work: list, call: Callable) -> list:
        parts = [work[k::len(self.actors)] for k in range(len(self.actors))]
        answers = ray.get([call(actor, part) for actor, part in zip(self.actors, parts) if part])
        out = [None] * len(work)
        for k, answer in enumerate(answers):
            out[k::len(self.actors)] = answer
        return out

    def generate(self, prompts: list[str], attempt: int = 1, max_new_tokens: int | None = None
                 ) -> list[str | GenerationError]:
        return self._split(list(prompts), lambda actor, part: actor.generate.remote(part, attempt, max_new_tokens))

    def converse(self, conversations: Sequence[list[dict]], *, max_new_tokens: int | None = None
                 ) -> list[tuple[str, bool]]:
        return self._split([list(c) for c in conversations],
                           lambda actor, part: actor.converse.remote(part, max_new_tokens))

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor)
