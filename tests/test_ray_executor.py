"""The Ray executor on a local two-CPU cluster with two actors and two tiny models: the same scores
as this process, nothing lost or stored twice when an actor's process is killed or the driver stops,
failures named; generation split over actors gives the same replies."""

from __future__ import annotations

import os
import shutil
import signal

import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (optional extra [ray]: `pip install -e '.[ray]'`; "
                                        "CI installs it, so these tests run there)")

from biasaudit.core.store import ScoreStore  # noqa: E402
from biasaudit.data.item_table import OPTIONS, read_items  # noqa: E402
from biasaudit.lm.generate import GenerationSettings, LocalGenerator  # noqa: E402
from biasaudit.lm.tiny import save_tiny_model  # noqa: E402
from biasaudit.run import (
    pipeline,  # noqa: E402
    ray_executor,  # noqa: E402
)
from biasaudit.run.engine import EngineSpec, RayOptions  # noqa: E402
from biasaudit.run.ray_executor import RayGenerator, ShardError, score_on_ray  # noqa: E402

CI_BANK = "tests/fixtures/ci_bank.csv"
POOL = RayOptions(actors=2, shard_items=24, shard_retries=2)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    return [str(save_tiny_model(folder / f"tiny-{seed}", seed=seed)) for seed in (0, 1)]


@pytest.fixture(scope="module")
def items():
    return read_items(CI_BANK)


@pytest.fixture(scope="module")
def local_scores(models, items, tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "run_dir", lambda name: root / name)
        scores, _ = pipeline.score_run("local", items, models=models)
    return scores


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "run_dir", lambda name: tmp_path / name)
    monkeypatch.setattr(ray_executor, "run_dir", lambda name: tmp_path / name)
    return tmp_path


def by_key(scores: pd.DataFrame) -> pd.DataFrame:
    return scores.sort_values(["model", "item_id"]).reset_index(drop=True)


def assert_same_scores(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Equal to fp32 rounding: at most 1e-6 nats per token. (Shards batch other items together than a
    local run's chunks do, so padding and summation order differ; a sum over 100 tokens may move by more
    than 1e-6 without any token's log-prob moving by 1e-6.)"""
    got, expected = by_key(got), by_key(expected)
    assert list(got["item_id"]) == list(expected["item_id"]) and list(got["model"]) == list(expected["model"])
    for option in OPTIONS:
        assert (got[f"ntok_{option}"] == expected[f"ntok_{option}"]).all()
        assert np.abs(got[f"lp_mean_{option}"] - expected[f"lp_mean_{option}"]).max() <= 1e-6
        per_token = np.abs(got[f"lp_sum_{option}"] - expected[f"lp_sum_{option}"]) / expected[f"ntok_{option}"]
        assert per_token.max() <= 1e-6


def stored_rows(folder) -> int:
    """Rows in every stored part, superseded ones included: a shard stored twice would count twice."""
    return sum(len(pd.read_parquet(p)) for p in ScoreStore(folder).parts())


def test_two_actors_give_the_local_executors_scores(cluster, runs, models, items, local_scores):
    scores, timings = pipeline.score_run("ray", items, models=models, ray_options=POOL)
    assert_same_scores(scores, local_scores)
    assert list(scores["model"].drop_duplicates()) == models, "the same table order as a local run"
    assert set(timings["executor"]) == {"ray"} and timings["scored_now"].sum() == 2 * len(items)
    assert stored_rows(runs / "ray") == 2 * len(items)


def test_an_actor_killed_mid_run_loses_nothing_and_scores_nothing_twice(cluster, runs, models, items, local_scores):
    killed = []

    def kill_one(stored: int, busy: list[int]) -> None:
        if stored == 2 and busy and not killed:  # tied to progress: after the second stored shard
            os.kill(busy[0], signal.SIGKILL)
            killed.append(busy[0])


    scores, timings = score_on_ray("killed", items, models=models, spec=EngineSpec(), options=POOL,
                                   after_store=kill_one, progress=False)
    assert killed, "an actor had a shard in flight when the second shard was stored"
    assert timings["shards_retried"].sum() == 1
    assert stored_rows(runs / "killed") == 2 * len(items), "every version stored exactly once"
    assert_same_scores(scores, local_scores)


def test_an_interrupted_run_resumes_without_scoring_what_is_stored(cluster, runs, models, items, local_scores):

    def stop(stored: int, busy: list[int]) -> None:
        if stored == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        score_on_ray("stopped", items, models=models, spec=EngineSpec(), options=POOL, after_store=stop,
                     progress=False)
    before = stored_rows(runs / "stopped")
    assert 0 < before < 2 * len(items)
    scores, timings = pipeline.score_run("stopped", items, models=models, ray_options=POOL)
    assert timings["scored_now"].sum() == 2 * len(items) - before
    assert timings["read_back"].sum() == before
    assert stored_rows(runs / "stopped") == 2 * len(items)
    assert_same_scores(scores, local_scores)


def test_a_shard_whose_actor_keeps_dying_is_named_and_the_rest_is_stored(cluster, runs, models, items):

    killed = []

    def kill_one(stored: int, busy: list[int]) -> None:
        if stored == 1 and busy and not killed:
            os.kill(busy[0], signal.SIGKILL)
            killed.append(busy[0])

    no_retry = RayOptions(actors=2, shard_items=24, shard_retries=0)
    with pytest.raises(ShardError, match=r"1 shard\(s\) could not be scored: .*shard \d+ \(24 items, .*Every other "
                                         r"shard is stored"):
        score_on_ray("failed", items, models=models, spec=EngineSpec(), options=no_retry, after_store=kill_one,
                     progress=False)
    assert stored_rows(runs / "failed") == 2 * len(items) - 24


def test_an_error_in_the_scoring_itself_stops_the_run_with_its_message(cluster, runs, models, items, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(models[0], broken)
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(b"not a safetensors file")  # the tokenizer loads (the driver's), the model does not
    with pytest.raises(RuntimeError, match=r"scoring .*broken shard 0 \(24 items.* failed: .*afetensor"):
        pipeline.score_run("bad", items, models=[str(broken)], ray_options=POOL)
    assert not ScoreStore(runs / "bad").exists() or ScoreStore(runs / "bad").read().empty


def test_an_actor_no_node_can_hold_is_an_error_not_a_wait(cluster, runs, models, items):
    gpus = RayOptions(actors=1, gpus_per_actor=1)  # the test cluster has CPUs only
    with pytest.raises(ValueError, match=r"asks for 1 GPU\(s\) and 1 CPU\(s\), but the Ray cluster has 0 GPU\(s\) and 2"):
        pipeline.score_run("no-gpu", items, models=models[:1], ray_options=gpus)
    with pytest.raises(ValueError, match="ray_gpus_per_actor or ray_cpus_per_actor"):
        pipeline.score_run("too-big", items, models=models[:1], ray_options=RayOptions(cpus_per_actor=3))


def test_a_model_that_is_not_there_stops_the_run_before_any_actor_starts(runs, items, tmp_path):
    with pytest.raises(OSError, match="no-such-model"):
        pipeline.score_run("missing", items, models=[str(tmp_path / "no-such-model")], ray_options=POOL)


def test_generation_split_over_actors_gives_the_same_replies(cluster, models):
    settings = GenerationSettings(max_new_tokens=6)
    local = LocalGenerator(models[0], settings, device="cpu")
    prompts = ["Is the nurse tired?", "Who fixed the phone?", "护士累了吗？", "¿Quién está cansado?", "Yes or no?"]
    pool = RayGenerator(LocalGenerator(models[0], settings, device="cpu"), RayOptions(actors=2), device="cpu")
    try:
        assert pool.describe() == local.describe(), "the same cache keys as the local generator"
        assert pool.generate(prompts) == local.generate(prompts)
        conversations = [[{"role": "system", "content": "Translate."}, {"role": "user", "content": p}] for p in prompts]
        assert pool.converse(conversations, max_new_tokens=5) == local.converse(conversations, max_new_tokens=5)
    finally:
        pool.close()
