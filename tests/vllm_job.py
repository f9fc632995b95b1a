"""The in-process vLLM engine's part of tests/test_vllm.py, run by the vLLM environment's Python
(`make vllm` makes .venv-vllm: vLLM pins a transformers the project's environment does not have).

    .venv-vllm/bin/python tests/vllm_job.py MODEL ITEMS OUT

Scores the items through chapter 02's scoring (`pipeline.score_run` with `engine: vllm`, its check
against transformers in fp32 included) once in fp32 and once in bf16, each in a run of its own under
OUT/runs, and asks `VLLMGenerator` and `LocalGenerator` the same prompts greedily. Writes
OUT/<dtype>_scores.parquet, OUT/<dtype>_timings.parquet and OUT/replies.json for the test, which compares them with transformers in the project's environment.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

PROMPTS = ["Name a colour of the sky.", "Translate 'good morning' into Spanish.", "What is two plus two?"]


def main(model: str, items_path: str, out: Path) -> None:
    os.environ["BIASAUDIT_RUNS_DIR"] = str(out / "runs")
    from biasaudit.data.item_table import read_items
    from biasaudit.lm.generate import GenerationSettings, LocalGenerator
    from biasaudit.lm.vllm_engine import VLLMGenerator
    from biasaudit.run import pipeline
    from biasaudit.run.engine import EngineSpec

    items = read_items(items_path)
    for dtype in ("float32", "bfloat16"):
        spec = EngineSpec(engine="vllm", dtype=dtype, max_model_len=512, eager=True, check="transformers")
        scores, timings = pipeline.score_run(f"vllm-{dtype}", items, models=[model], spec=spec)
        scores.to_parquet(out / f"{dtype}_scores.parquet")
        timings.to_parquet(out / f"{dtype}_timings.parquet")
        gc.collect()  # the engine goes before the next starts
    settings = GenerationSettings(max_new_tokens=16, temperature=0.0, dtype="float32")
    replies = {"vllm": VLLMGenerator(model, settings, max_model_len=512, eager=True).generate(PROMPTS),
               "transformers": LocalGenerator(model, settings, device="cpu").generate(PROMPTS)}
    (out / "replies.json").write_text(json.dumps({"prompts": PROMPTS, **replies}, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
