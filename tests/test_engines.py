"""Scoring engines beyond transformers: the completions engine against a real server on 127.0.0.1
that answers with a tiny model, the engine check, and the vLLM engine where vLLM is installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest
from biasaudit.core.store import DTYPE_COLUMN, ScoreStore
from biasaudit.data.item_table import OPTIONS, read_items
from biasaudit.lm.completions import CompletionsEngine
from biasaudit.lm.engines import EngineError, check_engine, precision_label, sums_from_logprobs
from biasaudit.lm.registry import load_model
from biasaudit.lm.scoring import score
from biasaudit.lm.tiny import save_tiny_model, tiny_model
from biasaudit.lm.tokens import Sequence, start_token_id
from biasaudit.run import pipeline
from biasaudit.run.engine import EngineSpec, ModelScorer

from tests.completions_server import CompletionsServer

CI_BANK = "tests/fixtures/ci_bank.csv"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A tiny model saved as an ordinary folder: the server loads it, the engine tokenizes with it."""
    folder = save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    network, tokenizer = load_model(str(folder), device="cpu")
    return str(folder), network, tokenizer


def test_prompt_logprobs_are_summed_over_the_options_tokens_by_hand():
    # ids: start, a, b, c; the option's tokens are b (predicted by the logits at 1) and c (at 2)
    sequence = Sequence([0, 5, 6, 7], [0, 1, 2, 3], [-1] * 4, [(0, "stereotyped", 1, 6), (0, "stereotyped", 2, 7)])
    sums = sums_from_logprobs([sequence], [[None, -1.0, -2.0, -3.5]], "test")
    assert sums == {(0, "stereotyped"): (-5.5, 2)}
    with pytest.raises(EngineError, match="token 3 is None"):
        sums_from_logprobs([sequence], [[None, -1.0, -2.0, None]], "test")
    with pytest.raises(EngineError, match="3 prompt log-probs for a prompt of 4 tokens"):
        sums_from_logprobs([sequence], [[None, -1.0, -2.0]], "test")


def test_the_completions_engine_agrees_with_transformers_on_the_ci_bank(served):
    folder, network, tokenizer = served
    items = read_items(CI_BANK)
    reference = score(items, (network, tokenizer), model_name=folder, progress=False)
    with CompletionsServer(network, tokenizer) as server:
        scorer = ModelScorer(folder, EngineSpec(engine="completions", url=server.url, check="transformers"))
        table = scorer.score(items, progress=False)
    assert len(table) == len(items) and list(table["item_id"]) == list(reference["item_id"])
    for option in OPTIONS:
        assert (table[f"ntok_{option}"] == reference[f"ntok_{option}"]).all()
        assert np.abs(table[f"lp_sum_{option}"] - reference[f"lp_sum_{option}"]).max() <= 1e-4
    assert set(scorer.check["comparison"]) == {"transformers", "alone vs in a batch", "first half vs whole"}
    assert scorer.check["agrees"].all() and scorer.check["max_abs_diff"].max() < 1e-4
    body = server.requests[-1]["body"]
    assert body["echo"] is True and body["max_tokens"] == 1 and body["logprobs"] == 1
    start = start_token_id(tokenizer)
    prompts = [r["body"]["prompt"] for r in server.requests]
    assert all(isinstance(p, list) and all(isinstance(t, int) for t in p) for batch in prompts for p in batch), \
        "token ids are sent, never text"
    assert all(p[0] == start and p[1] != start for batch in prompts for p in batch), "one start token, ours"


def test_a_server_without_prompt_logprobs_is_a_clear_error(served):
    folder, network, tokenizer = served
    with CompletionsServer(network, tokenizer, mode="no_logprobs") as server:
        engine = CompletionsEngine(folder, server.url)
        with pytest.raises(EngineError, match="returned no prompt log-probs .* `echo` with `logprobs`"):
            engine.prompt_logprobs([[start_token_id(tokenizer), 5, 6]])


def test_a_busy_server_is_retried_and_an_error_reply_is_not(served):
    folder, network, tokenizer = served
    ids = [start_token_id(tokenizer), 5, 6, 7]
    with CompletionsServer(network, tokenizer, mode="busy") as server:
        engine = CompletionsEngine(folder, server.url, backoff_s=0.01)
        values = engine.prompt_logprobs([ids])[0]
        assert len(server.requests) == 3, "503, then 429, then the answer"
        engine = CompletionsEngine(folder, server.url.removesuffix("/v1") + "/elsewhere", backoff_s=0.01)
        with pytest.raises(EngineError, match="HTTP 404"):
            engine.prompt_logprobs([ids])
        assert len(server.requests) == 4, "a 404 is not retried"
    assert values[0] is None and all(v < 0 for v in values[1:])


def test_the_check_stops_a_server_whose_logprobs_are_wrong_before_anything_is_stored(served, tmp_path):
    folder, network, tokenizer = served
    other = tiny_model(len(tokenizer), seed=5)  # the same tokens, the wrong numbers (as the llama.cpp server gave)
    items = read_items(CI_BANK)
    store = ScoreStore(tmp_path)
    with CompletionsServer(network, tokenizer, mode="wrong", other_model=other) as server:
        # two random tiny models are both close to uniform (log-probs near -ln 400), so their numbers
        # differ by tenths of a nat, not the whole nats of a real wrong server: a tighter tolerance here
        scorer = ModelScorer(folder, EngineSpec(engine="completions", url=server.url, check="transformers",
                                                tolerance=0.01))
        with pytest.raises(EngineError, match=r"fail the check before a run: .*\(transformers\).*Nothing was scored"):
            scorer.score(items, store=store, progress=False)
        # without a reference, the wrong server is consistent with itself: the check cannot see it, and says so
        self_only = check_engine(CompletionsEngine(folder, server.url), tokenizer, tolerance=0.01)
    assert not store.exists() or store.read().empty
    assert "transformers" not in set(self_only["comparison"]) and self_only["agrees"].all()


def test_the_check_catches_an_engine_whose_logprobs_depend_on_the_batch(served):
    folder, network, tokenizer = served

    class Drifting(CompletionsEngine):  # a real server, and a client bug that shifts batched answers
        def prompt_logprobs(self, prompts):
            values = super().prompt_logprobs(prompts)
            return values if len(prompts) == 1 else [[None, *(v - 0.05 for v in row[1:])] for row in values]

    with CompletionsServer(network, tokenizer) as server:
        with pytest.raises(EngineError, match=r"alone vs in a batch.*0\.05"):
            check_engine(Drifting(folder, server.url), tokenizer, tolerance=0.01)


def test_a_run_through_the_completions_engine_is_stored_and_resumed(served, tmp_path, monkeypatch):
    folder, network, tokenizer = served
    monkeypatch.setattr(pipeline, "run_dir", lambda name: tmp_path / name)
    items = read_items(CI_BANK).head(12)
    with CompletionsServer(network, tokenizer) as server:
        spec = EngineSpec(engine="completions", url=server.url, check="self")
        scores, timings = pipeline.score_run("r", items, models=[folder], spec=spec)
        asked = len(server.requests)
        again, timings_again = pipeline.score_run("r", items, models=[folder], spec=spec)
    assert timings.loc[0, "scored_now"] == 12 and timings.loc[0, "engine"] == "completions"
    assert timings_again.loc[0, "scored_now"] == 0 and len(server.requests) == asked, "nothing is asked twice"
    pd.testing.assert_frame_equal(scores, again)
    assert set(ScoreStore(tmp_path / "r").read()[DTYPE_COLUMN]) == {"completions"}


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                    reason="vLLM is not installed in this environment: on a CPU tests/test_vllm.py runs it from .venv-vllm "
                           "(`make vllm`), on a GPU benchmarks/gpu_check.sh; never against a fake engine")
def test_the_vllm_engine_agrees_with_transformers(served):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("vLLM is installed but there is no CUDA device")
    from biasaudit.lm.vllm_engine import VLLMEngine

    folder, network, tokenizer = served
    items = read_items(CI_BANK)
    reference = score(items, (network, tokenizer), model_name=folder, progress=False)
    scorer = ModelScorer(folder, EngineSpec(engine="vllm", dtype="float32", check="transformers"))
    table = scorer.score(items, progress=False)
    assert isinstance(scorer.engine()[0], VLLMEngine)
    for option in OPTIONS:
        assert np.abs(table[f"lp_sum_{option}"] - reference[f"lp_sum_{option}"]).max() <= 1e-3


def test_a_served_name_the_server_does_not_know_says_which_it_serves(served, tmp_path):
    folder, network, tokenizer = served
    items = read_items(CI_BANK).head(4)
    with CompletionsServer(network, tokenizer, served_name="tiny-served") as server:
        scorer = ModelScorer(folder, EngineSpec(engine="completions", url=server.url, check="self"))
        with pytest.raises(EngineError, match=r"HTTP 404.*knows no model named '.*model'; it serves 'tiny-served': "
                                              r"start it with --served-model-name .*engine_served_names"):
            scorer.score(items, progress=False)
        named = EngineSpec(engine="completions", url=server.url, check="self",
                           served_names=((folder, "tiny-served"),))
        table = ModelScorer(folder, named).score(items, progress=False)
    reference = score(items, (network, tokenizer), model_name=folder, progress=False)
    assert np.abs(table["lp_sum_stereotyped"] - reference["lp_sum_stereotyped"]).max() <= 1e-3
    assert {r["body"]["model"] for r in server.requests} == {folder, "tiny-served"}


def test_a_declared_precision_is_stored_checked_and_never_mixed(served, tmp_path, monkeypatch):
    folder, network, tokenizer = served
    monkeypatch.setattr(pipeline, "run_dir", lambda name: tmp_path / name)
    items = read_items(CI_BANK).head(6)
    with CompletionsServer(network, tokenizer) as server:
        undeclared = EngineSpec(engine="completions", url=server.url, check="transformers")
        _, first = pipeline.score_run("r", items, models=[folder], spec=undeclared)
        fp32 = EngineSpec(engine="completions", url=server.url, check="transformers", server_precision="float32")
        _, second = pipeline.score_run("r", items, models=[folder], spec=fp32)
    assert undeclared.reused_precision is None and fp32.reused_precision == "completions-float32"
    # rows stored as "completions" (precision unknown) are scored again once the precision is declared
    assert first.loc[0, "scored_now"] == 6 and second.loc[0, "scored_now"] == 6
    stored = ScoreStore(tmp_path / "r").read()[DTYPE_COLUMN].value_counts().to_dict()
    assert stored == {"completions-float32": 6}  # the rescored rows replace those of unknown precision
    # the engine was started and checked before scoring: timed apart from it
    assert second.loc[0, "load_seconds"] > 0 and second.loc[0, "seconds"] > 0


def test_a_server_declared_fp32_that_is_not_stops_before_scoring(served, tmp_path):
    folder, network, tokenizer = served
    other = tiny_model(len(tokenizer), seed=5)  # numbers a few tenths of a nat off, within the check's tolerance
    with CompletionsServer(network, tokenizer, mode="wrong", other_model=other) as server:
        spec = EngineSpec(engine="completions", url=server.url, check="transformers", server_precision="float32")
        with pytest.raises(EngineError, match=r"declared to compute in float32, but .* differs from transformers in "
                                              r"fp32 by up to 0\.\d+ nats .*--dtype float32"):
            ModelScorer(folder, spec).score(read_items(CI_BANK).head(4), store=ScoreStore(tmp_path), progress=False)
        undeclared = EngineSpec(engine="completions", url=server.url, check="transformers")
        assert len(ModelScorer(folder, undeclared).score(read_items(CI_BANK).head(4), progress=False)) == 4
    assert not ScoreStore(tmp_path).exists() or ScoreStore(tmp_path).read().empty


def test_each_engine_stores_a_precision_that_names_it():
    assert precision_label("vllm", "bfloat16") == "vllm-bfloat16" and precision_label("completions", "") == "completions"
    assert EngineSpec(engine="vllm").reused_precision == "vllm-bfloat16"  # "auto": vLLM runs in bf16
    assert EngineSpec(engine="vllm", dtype="float32").reused_precision == "vllm-float32"
    assert EngineSpec(engine="transformers").reused_precision is None
    assert EngineSpec(engine="transformers", dtype="bfloat16").reused_precision == "bfloat16"
    assert EngineSpec(engine="completions", served_names=(("a", "b"),)).served_name("a") == "b"
    assert EngineSpec(engine="completions", served_names=(("a", "b"),)).served_name("c") == "c"
