"""Batched generation against one prompt at a time, on the same prompts (the template tests' path).

Asks SmolLM2-135M-Instruct (offline) the first `--prompts` filled prompts of the project's English
and Spanish templates, greedy, `--tokens` new tokens at most, in batches of 16 and one by one, and
prints new tokens per second for both and their ratio. The replies must be the same both ways
(checked before any number is printed). Then the default run's whole template-test generation is
timed for each offline model (cold cache), as chapter 30 runs it.

    python benchmarks/bench_generation.py [--prompts 48] [--tokens 24] [--dtype float32] [--full]
"""

from __future__ import annotations

import argparse
import time

from biasaudit.lm.generate import GenerationSettings, LocalGenerator
from biasaudit.run.params import RunParams
from biasaudit.templates.asking import run_template_tests
from biasaudit.templates.library import instances, prompts, read_project_library


def new_tokens(generator: LocalGenerator, replies: list[str]) -> int:
    return sum(generator.tokens(replies)) + len(replies)  # the end-of-turn token is generated too


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--full", action="store_true", help="also time the default run's template tests")
    args = parser.parse_args()
    templates, communities = read_project_library(["es"], paraphrases=False)
    texts = prompts(templates, instances(templates, communities, max_instances=1, seed=1))["prompt_text"].tolist()
    texts = texts[: args.prompts]
    generator = LocalGenerator("smollm2-135m", GenerationSettings(max_new_tokens=args.tokens, dtype=args.dtype))
    generator.generate(texts[:2])  # load and warm up
    order = sorted(range(len(texts)), key=lambda i: generator.lengths([texts[i]])[0], reverse=True)
    started = time.perf_counter()
    batched = [None] * len(texts)
    for start in range(0, len(order), 16):
        chunk = order[start:start + 16]
        for i, reply in zip(chunk, generator.generate([texts[i] for i in chunk])):
            batched[i] = reply
    batch_seconds = time.perf_counter() - started
    started = time.perf_counter()
    alone = [generator.generate([t])[0] for t in texts]
    alone_seconds = time.perf_counter() - started
    assert batched == alone, "batched replies differ from one-at-a-time replies"
    tokens = new_tokens(generator, batched)
    print(f"{len(texts)} prompts, {tokens} new tokens ({args.dtype}): batch 16 {tokens / batch_seconds:.1f} tok/s "
          f"({batch_seconds:.1f} s), one at a time {tokens / alone_seconds:.1f} tok/s ({alone_seconds:.1f} s): "
          f"{alone_seconds / batch_seconds:.1f}x")
    if args.full:
        params = RunParams()
        full, communities = read_project_library(params.languages)
        full = full.loc[(full["variant"] != "paraphrase") | full["via"].isin(params.template_routes)]
        for model in params.chat_models:
            generator = LocalGenerator(model, GenerationSettings(max_new_tokens=params.max_new_tokens,
                                                                 dtype=params.generation_dtype))
            started = time.perf_counter()
            _, responses = run_template_tests(full, communities, generator, max_instances=params.max_instances,
                                              seed=params.seed, n_attempts=params.n_attempts,
                                              answer_margin=params.answer_margin, progress=False)
            print(f"default run, {model} ({generator.describe()['dtype']}): {len(responses)} prompts in "
                  f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
