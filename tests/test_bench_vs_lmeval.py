"""The benchmark against lm-evaluation-harness measures what it says: same tokens give the same log-probs,
a token straddling the context/option boundary is caught, tokens forwarded are counted, and the GPU
check script runs (on a CPU, with the tiny random model). Most need lm-eval (in the dev and bench extras; skipped where it is not installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
needs_lmeval = pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None,
                                  reason="lm-eval (the bench extra) is not installed")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_vs_lmeval", ROOT / "benchmarks" / "bench_vs_lmeval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _bench()


@pytest.fixture(scope="module")
def tiny_random(offline_cache):
    from biasaudit.lm.registry import load_model

    return load_model("tiny-random", device="cpu")


@needs_lmeval
@pytest.mark.slow
def test_same_tokens_same_log_probs_and_the_straddling_pairs_are_set_apart(bench, tiny_random, small_items):
    from biasaudit.lm.scoring import score

    network, tokenizer = tiny_random
    pairs = bench.item_pairs(small_items)
    ours = bench.our_tokens(tokenizer, pairs)
    lm = bench.make_lm(network, "tiny-random", 4, add_bos_token=True)
    checked = bench.screen(lm, tokenizer, pairs, ours)

    # "护士说" + "她累了。": no space in Chinese, and the tiny tokenizer merges across the boundary
    zh = (pairs["row"] == small_items.index[small_items["item_id"] == "a/zh"][0]).to_numpy()
    assert checked.straddling[zh & (pairs["option"] == "stereotyped").to_numpy()].all()
    assert not checked.straddling[(pairs["language"] != "zh").to_numpy()].any()
    assert not (checked.same_tokens & checked.straddling).any(), "lm-eval cannot split a straddling token"
    assert (checked.same_tokens | checked.straddling | ~checked.scorable).all(), \
        "with a start token, every other pair is tokenized as score() does"

    instances = [r for r, keep in zip(bench.requests(pairs), checked.scorable) if keep]
    counter = bench.ForwardCounter().attach(network)
    try:
        theirs = lm.loglikelihood(instances, disable_tqdm=True)
    finally:
        counter.detach()
    tokens, inputs = bench.lmeval_unpadded_tokens([e for e, keep in zip(checked.encodings, checked.scorable) if keep])
    assert counter.rows == inputs and counter.padded_tokens >= tokens > 0

    counter = bench.ForwardCounter().attach(network)
    try:
        table = score(small_items, tiny_random, model_name="tiny-random", batch_size=4, progress=False)
    finally:
        counter.detach()
    assert counter.rows == len(small_items), "one packed sequence per item version"
    tokens, sequences = bench.score_unpadded_tokens(small_items, network, tokenizer, pack=True)
    assert counter.padded_tokens >= tokens > 0 and sequences == len(small_items)

    lp_ours = bench.pair_values(pairs, "lp_sum", table)
    lp_theirs = np.full(len(pairs), np.nan)
    lp_theirs[checked.scorable] = [lp for lp, _ in theirs]
    same = checked.same_tokens
    assert same.sum() >= len(pairs) - 3
    np.testing.assert_allclose(lp_ours[same], lp_theirs[same], atol=1e-4, rtol=0)
    assert np.nanmax(np.abs(lp_ours[~same] - lp_theirs[~same])) > 1e-3, "the straddling pairs do differ"

    # lm-eval as it comes puts no start token before a non-empty context: only the empty context agrees
    default = bench.screen(bench.make_lm(network, "tiny-random", 4, add_bos_token=None), tokenizer, pairs, ours)
    empty = (pairs["context"] == "").to_numpy()
    assert empty.any() and (default.same_tokens == empty).all()


def test_precision_agreement_reads_soft_scores_and_flips(bench, tiny_lm, small_items):
    from biasaudit.lm.scoring import score

    model, tokenizer = tiny_lm
    reference = score(small_items, (model, tokenizer), model_name="tiny", progress=False)
    shifted = reference.copy()
    shifted["lp_mean_stereotyped"] = shifted["lp_mean_stereotyped"] + 0.5
    shifted.loc[0, "lp_sum_third"] -= 2.0
    out = bench.precision_agreement(reference, shifted.iloc[::-1])  # row order must not matter
    contrast = reference["lp_mean_stereotyped"] - reference["lp_mean_anti_stereotyped"]
    expected = np.max(np.abs(1 / (1 + np.exp(-(contrast + 0.5))) - 1 / (1 + np.exp(-contrast))))
    assert out["max_abs_delta_soft"] == pytest.approx(expected)
    assert out["max_abs_delta_lp_sum"] == pytest.approx(2.0)
    assert out["binary_flips"] == int(((contrast <= 0) & (contrast + 0.5 > 0)).sum())


def test_gpu_check_script_parses_and_refuses_without_a_gpu():
    script = ROOT / "benchmarks" / "gpu_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the refusal cannot be seen")
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, env={**os.environ,
                         "PYTHON": sys.executable})
    assert run.returncode == 3 and "no CUDA GPU" in run.stderr


@needs_lmeval
@pytest.mark.slow
def test_gpu_check_cpu_smoke_runs_the_benchmark_end_to_end(tmp_path):
    out = tmp_path / "smoke.json"
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--cpu-smoke"], capture_output=True,
                         text=True, env={**os.environ, "PYTHON": sys.executable, "OUT": str(out), "ITEMS": "6"},
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(out.read_text())
    sides = results["bfloat16"]["sides"]
    assert set(sides) == {"score() packed", "score() unpacked", "lm-eval add_bos_token=True"}
    assert results["pairs"] == 18 and all(side["pairs_per_s"] > 0 for side in sides.values())
    assert sides["score() packed"]["tokens"] < sides["score() unpacked"]["tokens"], "packing forwards fewer tokens"
    assert sides["score() packed"]["rows"] == 6 and sides["score() unpacked"]["rows"] == 18
    assert all(side["padded_tokens"] >= side["tokens"] for side in sides.values())
    assert all(len(side["seconds"]) == 2 for side in sides.values()), "A B C C B A: two timed runs per side"
    assert "ratio_vs_lmeval" in sides["score() packed"] and "score() packed" in run.stdout


def test_without_lmeval_the_benchmark_says_how_to_install_it(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "lmeval_available", lambda: False)
    assert bench.main(["--items", "1"]) == 2
    assert "pip install -e '.[bench]'" in capsys.readouterr().err
