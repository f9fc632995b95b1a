"""Scoring in bf16 (the fast CPU path): it runs, agrees with fp32 within what bf16 logits allow, and the
params' `scoring_dtype` reaches the scorer and decides which stored rows a rerun reuses."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from biasaudit.core.store import ScoreStore
from biasaudit.data.item_table import OPTIONS
from biasaudit.lm import scoring, tokens
from biasaudit.lm.registry import scoring_dtype
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams


@pytest.fixture(scope="module")
def fp32_and_bf16(tiny_lm):
    model, tokenizer = tiny_lm
    return model, copy.deepcopy(model).to(torch.bfloat16), tokenizer


@torch.inference_mode()
def _max_logit_gap(fp32, bf16, tokenizer, items: pd.DataFrame) -> float:
    """The largest |bf16 logit - fp32 logit| over every position of every option read alone."""
    gap = 0.0
    for item in items.itertuples(index=False):
        for option in OPTIONS:
            ids, _ = tokens.encode_joint(tokenizer, item.context, getattr(item, option), item.language)
            inputs = torch.tensor([ids])
            gap = max(gap, float((bf16(inputs).logits.float() - fp32(inputs).logits).abs().max()))
    return gap


@pytest.mark.parametrize("pack", [True, False])
def test_bf16_scores_agree_with_fp32_within_the_logit_error(fp32_and_bf16, small_items, pack):
    """A token's log-prob is its logit minus the log-sum-exp of all logits; when every logit is off by at
    most d, the log-prob is off by at most 2d, and a continuation's sum by at most 2d per token. d is
    measured on the same texts (bf16 against fp32, each option alone); the packed and batched paths
    add their own bf16 rounding of the same size, hence 4d. A log-softmax taken in bf16, a mask gone
    wrong in bf16 or a dtype that never reached the model would break the bound or the second check."""
    fp32, bf16, tokenizer = fp32_and_bf16
    d = _max_logit_gap(fp32, bf16, tokenizer, small_items)
    reference = scoring.score(small_items, (fp32, tokenizer), model_name="tiny", batch_size=4, pack=pack,
                              progress=False)
    fast = scoring.score(small_items, (bf16, tokenizer), model_name="tiny", batch_size=4, pack=pack, progress=False)
    worst = 0.0
    for option in OPTIONS:
        np.testing.assert_array_equal(fast[f"ntok_{option}"], reference[f"ntok_{option}"])
        gap = np.abs(fast[f"lp_sum_{option}"] - reference[f"lp_sum_{option}"]).to_numpy()
        bound = 4 * d * reference[f"ntok_{option}"].to_numpy() + 1e-5
        assert (gap <= bound).all(), f"{option}: |bf16 - fp32| {gap.max():.4g} beyond 4 d per token (d = {d:.3g})"
        worst = max(worst, gap.max())
    assert worst > 0, "bf16 and fp32 gave identical log-probs: the bf16 model was not used"


def test_bf16_log_softmax_is_taken_in_fp32(fp32_and_bf16, small_items, monkeypatch):
    """The bf16 scorer's log-probs equal an fp32 log-softmax of the model's own bf16 logits (to fp32
    rounding), not a bf16 log-softmax (whose rounding alone is about |log-prob| / 256 per token)."""
    _, bf16, tokenizer = fp32_and_bf16
    monkeypatch.setattr(scoring, "GATHER_TARGETS", False)
    one = small_items.iloc[[0]]
    scores = scoring.score(one, (bf16, tokenizer), model_name="tiny", pack=False, batch_size=1, progress=False)
    for option in OPTIONS:
        ids, positions = tokens.encode_joint(tokenizer, one["context"].iloc[0], one[option].iloc[0], "en")
        with torch.inference_mode():
            logits = bf16(torch.tensor([ids])).logits[0]
        in_fp32 = sum(float(torch.log_softmax(logits[p - 1].float(), -1)[ids[p]]) for p in positions)
        in_bf16 = sum(float(torch.log_softmax(logits[p - 1], -1)[ids[p]]) for p in positions)
        assert scores[f"lp_sum_{option}"].iloc[0] == pytest.approx(in_fp32, abs=1e-5)
        assert abs(in_bf16 - in_fp32) > 1e-4, "a bf16 log-softmax must differ here for this test to mean anything"


def test_the_params_value_maps_to_the_scorers_dtype():
    assert scoring_dtype("auto") is None  # the device's default: fp32 on a CPU, bf16 on CUDA
    assert scoring_dtype("bfloat16") is torch.bfloat16
    assert scoring_dtype("float32") is torch.float32
    assert scoring_dtype("float16") is torch.float16
    with pytest.raises(ValueError, match="scoring_dtype"):
        scoring_dtype("int8")
    assert RunParams().scoring_dtype == "auto"


def test_scoring_dtype_reaches_the_model_through_the_chapter(small_items, tmp_path, monkeypatch, offline_cache):
    """RunParams.scoring_dtype -> chapter 02's step -> pipeline.score_run -> score() -> load_model: the model is
    loaded in that precision, the store records it, and a rerun in another named precision scores
    again while "auto" reuses what is stored."""
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(pipeline, "prepare_run", lambda params: None)
    monkeypatch.setattr(pipeline, "read_run_items", lambda run_name: (
        small_items, pd.DataFrame(columns=small_items.columns), pd.DataFrame()))
    loaded = []
    original = scoring.load_model

    def recording_load_model(model, *, device=None, dtype=None):
        network, tokenizer = original(model, device=device, dtype=dtype)
        loaded.append(next(network.parameters()).dtype)
        return network, tokenizer

    monkeypatch.setattr(scoring, "load_model", recording_load_model)
    store = ScoreStore(tmp_path / "t")

    def run(choice: str) -> pd.DataFrame:
        params = RunParams(run_name="t", models=["tiny-random"], scoring_dtype=choice, batch_size=4)
        pipeline.run_scoring(params)  # chapter 02's step
        return store.read()

    stored = run("bfloat16")
    assert loaded == [torch.bfloat16]
    assert set(stored[scoring.DTYPE_COLUMN]) == {"bfloat16"} and len(stored) == len(small_items)
    run("auto")
    assert loaded == [torch.bfloat16], '"auto" reuses stored rows whatever their precision'
    stored = run("float32")
    assert loaded == [torch.bfloat16, torch.float32], "rows stored in bf16 are scored again in fp32"
    assert set(stored[scoring.DTYPE_COLUMN]) == {"float32"}
    small_items.to_parquet(tmp_path / "t" / "items.parquet")
    scores = pipeline.read_scores("t")
    assert scoring.DTYPE_COLUMN not in scores.columns and len(scores) == len(small_items)


def test_bf16_on_a_cpu_without_it_warns(fp32_and_bf16, small_items, monkeypatch):
    _, bf16, tokenizer = fp32_and_bf16
    monkeypatch.setattr(scoring, "cpu_has_native_bf16", lambda: False)
    with pytest.warns(RuntimeWarning, match="emulated"):
        scoring.score(small_items.head(1), (bf16, tokenizer), model_name="tiny", progress=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_log_softmax_taken_a_slice_of_rows_at_a_time_is_the_whole_rows_one(dtype, monkeypatch):
    """`target_logprobs` converts a few rows at a time to fp32 (slices that do not divide the rows
    evenly here): each row's value is its own log-softmax, computed in float64 from the same logits,
    and equals the former one-piece computation exactly."""
    generator = torch.Generator().manual_seed(5)
    logits = (torch.randn(23, 1000, generator=generator) * 4).to(dtype)
    tokens = torch.randint(0, 1000, (23,), generator=generator)
    expected = torch.log_softmax(logits.double(), -1)[torch.arange(23), tokens]
    monkeypatch.setattr(scoring, "LOG_SOFTMAX_ELEMENTS", 5 * 1000 + 7)  # slices of 5 rows: 5, 5, 5, 5, 3
    sliced = scoring.target_logprobs(logits, tokens)
    assert sliced.dtype == torch.float64 and sliced.shape == (23,)
    torch.testing.assert_close(sliced, expected, atol=5e-6, rtol=0)
    # and bit for bit what the whole batch converted at once gives (so stored scores stay comparable)
    whole = logits.float()
    assert torch.equal(sliced, (whole.gather(1, tokens[:, None]).squeeze(1) - torch.logsumexp(whole, -1)).double())
    monkeypatch.setattr(scoring, "LOG_SOFTMAX_ELEMENTS", 1)  # one row at a time
    torch.testing.assert_close(scoring.target_logprobs(logits, tokens), expected, atol=5e-6, rtol=0)
