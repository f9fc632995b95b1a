"""The scorer against a deliberately naive reference, on tiny random models and on SmolLM2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from biasaudit.core.store import ScoreStore
from biasaudit.data.item_table import OPTIONS
from biasaudit.lm import scoring, tokens
from biasaudit.lm.reference import naive_scores


def assert_matches_reference(scores: pd.DataFrame, reference: pd.DataFrame, tol: float = 1e-4) -> None:
    merged = scores.merge(reference, on="item_id", suffixes=("", "_ref"))
    assert len(merged) == len(reference)
    for option in OPTIONS:
        np.testing.assert_array_equal(merged[f"ntok_{option}"], merged[f"ntok_{option}_ref"])
        np.testing.assert_allclose(merged[f"lp_sum_{option}"], merged[f"lp_sum_{option}_ref"], atol=tol, rtol=0)


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("fixture", ["tiny_lm", "tiny_lm_with_bos"])
def test_score_matches_naive_reference(fixture, pack, small_items, request):
    model, tokenizer = request.getfixturevalue(fixture)
    scores = scoring.score(small_items, (model, tokenizer), model_name="tiny", progress=False, batch_size=4,
                           pack=pack)
    assert_matches_reference(scores, naive_scores(model, tokenizer, small_items))
    assert (scores["lp_sum_stereotyped"] < 0).all()
    np.testing.assert_allclose(scores["lp_mean_third"], scores["lp_sum_third"] / scores["ntok_third"])


def test_start_token_supplied_only_when_missing(tiny_lm, tiny_lm_with_bos):
    for (_, tokenizer), adds in ((tiny_lm, False), (tiny_lm_with_bos, True)):
        ids, positions = tokens.encode_joint(tokenizer, "", "Nurses are kind.", "en")
        plain = tokenizer("Nurses are kind.", add_special_tokens=False)["input_ids"]
        assert ids[0] == tokenizer.bos_token_id
        assert ids[1:] == plain, "exactly one start token, never two"
        # empty context: every token of the sentence is scored, the first one from the start token
        assert positions == list(range(1, len(ids)))
        assert (tokenizer("x")["input_ids"][0] == tokenizer.bos_token_id) == adds


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("batch_size", [1, 7, 32])
def test_batch_size_does_not_change_scores(batch_size, pack, tiny_lm, small_items):
    model, tokenizer = tiny_lm
    many = pd.concat([small_items.assign(item_id=small_items["item_id"] + f"-{k}") for k in range(6)])
    baseline = scoring.score(many, (model, tokenizer), model_name="tiny", batch_size=1, progress=False, pack=False)
    scores = scoring.score(many, (model, tokenizer), model_name="tiny", batch_size=batch_size, progress=False,
                           pack=pack)
    for option in OPTIONS:
        np.testing.assert_allclose(scores[f"lp_sum_{option}"], baseline[f"lp_sum_{option}"], atol=1e-5, rtol=0)
        np.testing.assert_array_equal(scores[f"ntok_{option}"], baseline[f"ntok_{option}"])


def test_token_straddling_the_boundary_is_scored_with_the_continuation(tiny_lm):
    model, tokenizer = tiny_lm
    context, continuation = "护士说", "她累了。"  # no space in Chinese: BPE merges across the boundary
    encoding = tokenizer(context + continuation, return_offsets_mapping=True)
    straddling = [(s, e) for s, e in encoding["offset_mapping"] if s < len(context) < e]
    assert straddling, "the fixture tokenizer must merge a token across the boundary for this test to mean anything"
    ids, positions = tokens.encode_joint(tokenizer, context, continuation, "zh")
    offsets = [(0, 0), *encoding["offset_mapping"]]
    assert any(offsets[p][0] < len(context) for p in positions), "the straddling token is part of the continuation"
    items = pd.DataFrame([{
        "item_id": "m/zh", "base_id": "m", "source": "written", "dimension": "gender", "category": "pronoun",
        "language": "zh", "variant": "translation", "via": "human", "context": context,
        "stereotyped": continuation, "anti_stereotyped": "他累了。", "third": "天空。", "third_kind": "unrelated",
    }])
    scores = scoring.score(items, (model, tokenizer), model_name="tiny", progress=False)
    assert_matches_reference(scores, naive_scores(model, tokenizer, items))


def test_boundary_error_drops_the_first_continuation_token(tiny_lm, small_items):
    model, tokenizer = tiny_lm
    english = small_items.loc[small_items["language"] == "en"].reset_index(drop=True)
    right = scoring.score(english, (model, tokenizer), model_name="tiny", progress=False)
    wrong = scoring.score(english, (model, tokenizer), model_name="tiny", progress=False, scorer_boundary=True)
    assert wrong["scorer_boundary"].all() and not right["scorer_boundary"].any()
    compared = 0
    for it, good, bad in zip(english.itertuples(), right.itertuples(), wrong.itertuples()):
        for option in OPTIONS:
            text = getattr(it, option)
            ids, positions = tokens.encode_joint(tokenizer, it.context, text, "en")
            separate, _ = tokens.encode_separately(tokenizer, it.context, text, "en")
            if ids != separate:
                continue  # tokenizations differ; the comparison below assumes they agree
            compared += 1
            first_lp = reference_first_token_logprob(model, ids, positions[0])
            assert getattr(bad, f"ntok_{option}") == getattr(good, f"ntok_{option}") - 1
            assert getattr(bad, f"lp_sum_{option}") == pytest.approx(getattr(good, f"lp_sum_{option}") - first_lp,
                                                                      abs=1e-4)
    assert compared >= 6, f"only {compared} options tokenize the same both ways: the test would check too little"


def reference_first_token_logprob(model, ids: list[int], position: int) -> float:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, position - 1].double()
    return float(torch.log_softmax(logits, -1)[ids[position]])


def test_boundary_error_leaves_one_token_continuations_with_nothing(tiny_lm):
    model, tokenizer = tiny_lm
    word = "she"
    assert len(tokenizer(" " + word, add_special_tokens=False)["input_ids"]) == 1
    ids, positions = tokens.encode_separately(tokenizer, "The nurse said that", word, "en")
    assert positions == []
    items = pd.DataFrame([{
        "item_id": "o/en", "base_id": "o", "source": "written", "dimension": "gender", "category": "pronoun",
        "language": "en", "variant": "original", "via": "human", "context": "The nurse said that",
        "stereotyped": "she", "anti_stereotyped": "he", "third": "the", "third_kind": "unrelated",
    }])
    wrong = scoring.score(items, (model, tokenizer), model_name="tiny", progress=False, scorer_boundary=True)
    assert wrong.loc[0, "ntok_stereotyped"] == 0 and wrong.loc[0, "lp_sum_stereotyped"] == 0.0


def test_resume_scores_nothing_twice(tiny_lm, small_items, tmp_path, monkeypatch):
    model, tokenizer = tiny_lm
    out = ScoreStore(tmp_path)
    calls: list[int] = []
    real = scoring._score_sequences

    def counting(network, sequences, **kwargs):
        calls.append(len({t[0] for s in sequences for t in s.targets}))
        if kill_on_second_chunk and len(calls) == 2:
            raise RuntimeError("killed")  # killed halfway, after the first chunk was written
        return real(network, sequences, **kwargs)

    kill_on_second_chunk = True
    monkeypatch.setattr(scoring, "_score_sequences", counting)
    with pytest.raises(RuntimeError, match="killed"):
        scoring.score(small_items, (model, tokenizer), model_name="tiny", store=out, chunk_items=2, progress=False)
    assert len(out.read()) == 2 and len(out.parts()) == 1
    kill_on_second_chunk = False
    calls.clear()
    resumed = scoring.score(small_items, (model, tokenizer), model_name="tiny", store=out, chunk_items=2,
                            progress=False)
    assert sum(calls) == len(small_items) - 2, "only the items not yet stored are scored"
    assert resumed.attrs["n_scored"] == len(small_items) - 2
    assert list(resumed["item_id"]) == list(small_items["item_id"])
    calls.clear()
    again = scoring.score(small_items, (model, tokenizer), model_name="tiny", store=out, progress=False)
    assert calls == [] and again.attrs["n_scored"] == 0
    pd.testing.assert_frame_equal(again, resumed)
    # an item whose text changed is rescored, not served stale
    edited = small_items.copy()
    edited.loc[0, "stereotyped"] = "she was very tired."
    scoring.score(edited, (model, tokenizer), model_name="tiny", store=out, progress=False)
    assert sum(calls) == 1
    stored = out.read()
    assert len(stored) == len(small_items)
    assert stored.loc[stored["item_id"] == "a/en", "stereotyped"].item() == "she was very tired."
    # a metadata edit that leaves the texts alone is not rescored, but shows in the result
    calls.clear()
    relabelled = edited.assign(dimension="profession")
    result = scoring.score(relabelled, (model, tokenizer), model_name="tiny", store=out, progress=False)
    assert calls == [] and (result["dimension"] == "profession").all()


def test_packing_shares_the_context(tiny_lm, small_items):
    _, tokenizer = tiny_lm
    packed = tokens.build_sequences(small_items, tokenizer, pack=True)
    single = tokens.build_sequences(small_items, tokenizer, pack=False)
    assert len(packed) == len(small_items) and len(single) == 3 * len(small_items)
    assert sum(len(s.ids) for s in packed) < sum(len(s.ids) for s in single)
    too_long = tokens.build_sequences(small_items, tokenizer, pack=True, max_packed_length=5)
    assert len(too_long) == 3 * len(small_items), "items longer than a sliding window are not packed"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_offline_models_match_naive_reference(name, small_items):
    from biasaudit.lm.registry import load_model

    model, tokenizer = load_model(name, device="cpu")
    assert next(model.parameters()).dtype == torch.float32
    if name == "smollm2-135m":
        assert tokenizer("The nurse")["input_ids"][0] != tokenizer.bos_token_id, "SmolLM2 adds no start token"
    scores = scoring.score(small_items, (model, tokenizer), model_name=name, progress=False, batch_size=4)
    assert_matches_reference(scores, naive_scores(model, tokenizer, small_items))


def test_auto_batch_size_fits_a_token_budget_on_cpu(tiny_lm, small_items):
    model, tokenizer = tiny_lm
    sequences = tokens.build_sequences(small_items, tokenizer)
    longest = max(len(s.ids) for s in sequences)
    assert scoring.auto_batch_size(sequences, "cpu") == min(scoring.AUTO_CPU_TOKENS // longest, scoring.AUTO_MAX_BATCH)
    assert scoring.auto_batch_size(sequences, "cuda:0") == scoring.AUTO_MAX_BATCH
    long = [tokens.Sequence(ids=list(range(5000)), position_ids=list(range(5000)), segments=[-1] * 5000, targets=[])]
    assert scoring.auto_batch_size(long, "cpu") == 1
    auto = scoring.score(small_items, (model, tokenizer), model_name="tiny", batch_size="auto", progress=False)
    fixed = scoring.score(small_items, (model, tokenizer), model_name="tiny", batch_size=1, progress=False)
    np.testing.assert_allclose(auto["lp_sum_stereotyped"], fixed["lp_sum_stereotyped"], atol=1e-5, rtol=0)
    assert auto.attrs["batch_size"] == scoring.auto_batch_size(sequences, "cpu")


def _all_cuts(n: int, batch_size: int):
    """Every way to cut n sequences into consecutive batches of at most batch_size (brute force)."""
    if n == 0:
        yield []
        return
    for first in range(1, min(batch_size, n) + 1):
        for rest in _all_cuts(n - first, batch_size):
            yield [first, *rest]


@pytest.mark.parametrize("seed", range(6))
def test_length_batches_are_the_cheapest_cut_found_by_trying_every_cut(seed):
    rng = np.random.default_rng(seed)
    lengths = sorted(rng.integers(5, 200, size=int(rng.integers(1, 11))).tolist(), reverse=True)
    batch_size, call_cost = int(rng.integers(1, 5)), int(rng.integers(0, 120))

    def cost(sizes):
        starts = np.cumsum([0, *sizes[:-1]])
        return sum(size * lengths[start] + call_cost for start, size in zip(starts, sizes))

    sizes = scoring.length_batches(lengths, batch_size, call_cost)
    assert sum(sizes) == len(lengths) and max(sizes) <= batch_size
    assert cost(sizes) == min(cost(cut) for cut in _all_cuts(len(lengths), batch_size))


def test_length_batches_by_hand():
    # 100,100,10,10 at most 4 a batch: one batch forwards 400 slots + 50; two (100,100 | 10,10)
    # forward 220 + 100. With a call costing 200, one batch (450) beats two (620).
    assert scoring.length_batches([100, 100, 10, 10], 4, call_cost=50) == [2, 2]
    assert scoring.length_batches([100, 100, 10, 10], 4, call_cost=200) == [4]
    assert scoring.length_batches([7, 7, 7, 7, 7], 2, call_cost=1) in ([2, 2, 1], [2, 1, 2], [1, 2, 2])
    with pytest.raises(ValueError, match="longest first"):
        scoring.length_batches([3, 9], 2)


def test_out_of_memory_halves_the_batch_and_keeps_the_scores(tiny_lm, small_items, monkeypatch):
    model, tokenizer = tiny_lm
    many = pd.concat([small_items.assign(item_id=small_items["item_id"] + f"-{k}") for k in range(4)])
    baseline = scoring.score(many, (model, tokenizer), model_name="tiny", batch_size=1, progress=False)
    forward, calls = model.forward, []

    def limited(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        if kwargs["input_ids"].shape[0] > 5:
            raise torch.cuda.OutOfMemoryError("injected")
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", limited)
    monkeypatch.setattr(scoring, "CALL_COST_TOKENS", 10**9)  # as few batches as can be: the first is > 5
    with pytest.warns(ResourceWarning, match="retrying at batch size") as caught:
        scores = scoring.score(many, (model, tokenizer), model_name="tiny", batch_size=16, progress=False)
    # the batch that failed is halved until it fits, and later batches keep to that size
    halvings = [calls[0]]
    while halvings[-1] > 5:
        halvings.append(halvings[-1] // 2)
    assert calls[0] > 5 and calls[: len(halvings)] == halvings and max(calls[len(halvings):]) <= halvings[-1]
    assert [str(w.message) for w in caught] == [f"out of memory on cpu: retrying at batch size {size}"
                                                for size in halvings[1:]]
    assert scores.attrs["batch_size"] == halvings[-1]
    np.testing.assert_allclose(scores["lp_sum_stereotyped"], baseline["lp_sum_stereotyped"], atol=1e-5, rtol=0)
    monkeypatch.setattr(model, "forward", lambda *a, **k: (_ for _ in ()).throw(torch.cuda.OutOfMemoryError("x")))
    with pytest.raises(torch.cuda.OutOfMemoryError), pytest.warns(ResourceWarning):
        scoring.score(many, (model, tokenizer), model_name="tiny", batch_size=2, progress=False)


def test_items_are_checked_before_any_model_loads(small_items):
    bad = small_items.copy()
    bad.loc[1, "stereotyped"] = " " + bad.loc[1, "stereotyped"]
    with pytest.raises(ValueError, match=r"row 1 \(.*\), field 'stereotyped': starts or ends with whitespace"):
        scoring.score(bad, "no-such/model-anywhere", progress=False)  # would fail on loading, not reached
    with pytest.raises(ValueError, match="batch_size"):
        scoring.score(small_items, "no-such/model-anywhere", batch_size=0, progress=False)


@pytest.mark.parametrize("pack", [True, False])
def test_the_output_layer_runs_for_target_positions_only(tiny_lm, small_items, pack, monkeypatch):
    """The output layer (vocab x hidden) gets one hidden state per scored token, not every kept position
    of every padded row; the scores are those it gives when it sees every position."""
    model, tokenizer = tiny_lm
    widths = []
    hook = model.get_output_embeddings().register_forward_hook(
        lambda module, args, output: widths.append(output.shape))  # after the scorer's own pre-hook
    try:
        fast = scoring.score(small_items, (model, tokenizer), model_name="tiny", batch_size=4, pack=pack,
                             progress=False)
    finally:
        hook.remove()
    targets = sum(len(s.targets) for s in tokens.build_sequences(small_items, tokenizer, pack=pack))
    assert all(shape[0] == 1 for shape in widths) and sum(shape[1] for shape in widths) == targets
    monkeypatch.setattr(scoring, "GATHER_TARGETS", False)
    full = scoring.score(small_items, (model, tokenizer), model_name="tiny", batch_size=4, pack=pack, progress=False)
    for option in OPTIONS:
        np.testing.assert_allclose(fast[f"lp_sum_{option}"], full[f"lp_sum_{option}"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("fixture", ["tiny_lm", "tiny_lm_with_bos"])
def test_the_boundary_error_reuses_stored_correct_scores_and_gives_the_same_numbers(fixture, small_items, tmp_path,
                                                                                    request, monkeypatch):
    """Error 3 on items already scored correctly in the store: where the options tokenize alike jointly
    and separately, the erroneous score is the correct one minus the first continuation token's
    log-prob, from a pass over the context alone. It must equal scoring the erroneous sequences
    themselves (no store), and forward fewer tokens; items that tokenize differently are scored in full."""
    model, tokenizer = request.getfixturevalue(fixture)
    items = pd.concat([small_items, small_items.assign(item_id=small_items["item_id"] + "-1",
                                                       stereotyped="x")], ignore_index=True)  # one-token options
    forwarded: list[int] = []  # tokens (padding included) of each forward pass
    original = model.forward

    def counting(*args, **kwargs):
        forwarded.append(int(kwargs["input_ids"].numel()))
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counting)
    direct = scoring.score(items, (model, tokenizer), model_name="tiny", scorer_boundary=True, progress=False)
    direct_tokens = sum(forwarded)
    correct = scoring.score(items, (model, tokenizer), model_name="tiny", store=tmp_path, progress=False)
    forwarded.clear()
    derived = scoring.score(items, (model, tokenizer), model_name="tiny", scorer_boundary=True, store=tmp_path,
                            progress=False)
    monkeypatch.setattr(model, "forward", original)
    plans = [tokens.boundary_from_joint(tokenizer, item) for item in items.itertuples(index=False)]
    assert any(p is not None for p in plans), "some items are reused"
    columns = [c for c in direct.columns if c.startswith(("lp_", "ntok_"))]
    pd.testing.assert_frame_equal(derived[columns], direct[columns], check_exact=False, rtol=0, atol=1e-5)
    one_token = derived.set_index("item_id").loc[correct.loc[correct["ntok_stereotyped"] == 1, "item_id"]]
    assert len(one_token), "some options are one token long (the tokenizer's \"x\")"
    assert (one_token["ntok_stereotyped"] == 0).all() and (one_token["lp_sum_stereotyped"] == 0).all()
    assert sum(forwarded) < direct_tokens, "the reused items forward their context only"


def test_a_run_whose_scores_are_all_stored_is_read_back_without_loading_torch(tiny_lm, small_items, tmp_path):
    """A warm rerun of chapter 02 reads every score back: the same table score() returns, in a process
    that never imports torch (its import alone takes seconds, its model load more)."""
    import os
    import subprocess
    import sys

    run_folder = tmp_path / "t"
    expected = scoring.score(small_items, tiny_lm, model_name="m", store=ScoreStore(run_folder), progress=False)
    small_items.to_parquet(tmp_path / "items.parquet")
    code = (
        "import sys, pandas as pd\n"
        "from biasaudit.run import pipeline\n"
        f"items = pd.read_parquet({str(tmp_path / 'items.parquet')!r})\n"
        "table, timings = pipeline.score_run('t', items, models=['m'])\n"
        f"table.to_parquet({str(tmp_path / 'back.parquet')!r})\n"
        "print('torch' in sys.modules, int(timings['scored_now'].sum()), int(timings['read_back'].sum()))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "BIASAUDIT_RUNS_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "0", str(len(small_items))]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "back.parquet"), expected.reset_index(drop=True))
