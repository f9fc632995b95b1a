"""Asking chat models: batched greedy decoding equals one prompt at a time, seeded sampling repeats,
the reply cache asks nothing twice (also after a crash), and an OpenAI-compatible server on
127.0.0.1 is reached over real HTTP, its failures turned into errors that count as unprocessable."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from biasaudit.lm.generate import (
    GenerationError,
    GenerationSettings,
    LocalGenerator,
    OpenAIGenerator,
    ask,
)
from biasaudit.translate.cache import KeyValueStore

PROMPTS = ["Are nurses kind?", "Is the sky green today or is it blue as it always was?", "护士说她累了吗？",
           "Do engineers fix bugs?", "La enfermera dijo que estaba cansada, ¿verdad?"]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    from biasaudit.lm.tiny import tiny_model, train_tokenizer

    tokenizer = train_tokenizer(add_bos=False)
    return LocalGenerator("tiny", GenerationSettings(max_new_tokens=8), network=tiny_model(len(tokenizer), seed=3),
                          tokenizer=tokenizer)


def test_batched_greedy_replies_equal_one_prompt_at_a_time(local):
    batched = local.generate(PROMPTS)
    alone = [local.generate([p])[0] for p in PROMPTS]
    assert batched == alone and all(isinstance(r, str) and r for r in batched)
    assert local.chat, "the tiny tokenizer has a chat template"
    assert local.texts(["hi"])[0].endswith("assistant: ")


def test_sampling_is_seeded_per_prompt_and_attempt(local):
    sampler = LocalGenerator("tiny", GenerationSettings(max_new_tokens=8, temperature=1.0, seed=7),
                             network=local._network, tokenizer=local._tokenizer)
    first = sampler.generate(PROMPTS[:3])
    assert sampler.generate(PROMPTS[:3]) == first
    assert [sampler.generate([p])[0] for p in PROMPTS[:3]] == first, "a reply does not depend on its batch"
    assert sampler.generate(PROMPTS[:3], attempt=2) != first, "another attempt samples afresh"


class Counting(LocalGenerator):
    def __init__(self, base: LocalGenerator, crash_after: int | None = None):
        super().__init__("tiny", base.settings, network=base._network, tokenizer=base._tokenizer)
        self.asked, self.crash_after = [], crash_after

    def generate(self, prompts, attempt=1, max_new_tokens=None):
        if self.crash_after is not None and len(self.asked) >= self.crash_after:
            raise RuntimeError("killed")
        self.asked += prompts
        return super().generate(prompts, attempt, max_new_tokens)


def test_the_cache_asks_nothing_twice_even_after_a_crash(local, tmp_path):
    cache = KeyValueStore(tmp_path / "replies.sqlite")
    crashing = Counting(local, crash_after=2)
    with pytest.raises(RuntimeError, match="killed"):
        ask(crashing, PROMPTS + PROMPTS[:2], cache=cache, batch_size=2, progress=False)
    assert len(crashing.asked) == 2
    again = Counting(local)
    replies = ask(again, PROMPTS + PROMPTS[:2], cache=cache, batch_size=2, progress=False)
    assert sorted(again.asked) == sorted(set(PROMPTS) - set(crashing.asked)), "repeats and stored replies are not asked"
    assert replies == local.generate(PROMPTS) + local.generate(PROMPTS[:2])
    assert ask(Counting(local), PROMPTS, cache=cache, max_new_tokens=4, progress=False) != replies[:5], \
        "another token budget is another cache entry"


class Server:
    """A minimal OpenAI-compatible server on 127.0.0.1 that answers with the tiny local model."""

    def __init__(self, local: LocalGenerator, fail_first: int = 0):
        self.requests, self.fail_first, outer = [], fail_first, self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the name http.server calls)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                if len(outer.requests) <= outer.fail_first:
                    self.send_response(503)
                    self.end_headers()
                    return
                reply = local.generate([body["messages"][0]["content"]], max_new_tokens=body["max_tokens"])[0]
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def test_an_openai_compatible_server_over_http(local, monkeypatch, tmp_path):
    server = Server(local)
    monkeypatch.setenv("TEST_KEY", "sk-secret")
    try:
        remote = OpenAIGenerator("tiny-served", server.url, GenerationSettings(max_new_tokens=8, seed=3),
                                 api_key_env="TEST_KEY")
        replies = ask(remote, PROMPTS[:3], cache=KeyValueStore(tmp_path / "c.sqlite"), progress=False)
        assert replies == local.generate(PROMPTS[:3])
        path, headers, body = server.requests[0]
        assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-secret"
        assert body["max_tokens"] == 8 and body["temperature"] == 0.0 and body["seed"] == 3, "settings are sent"
        assert "sk-secret" not in json.dumps(remote.describe()) and not (tmp_path / "c.sqlite").read_bytes().count(
            b"sk-secret"), "the key is never stored"
    finally:
        server.close()


def test_server_failures_become_errors_not_crashes(local):
    server = Server(local, fail_first=1)
    try:
        remote = OpenAIGenerator("tiny-served", server.url, GenerationSettings(max_new_tokens=4))
        first, second = remote.generate(PROMPTS[:2])
        assert isinstance(first, GenerationError) and "503" in first.reason and isinstance(second, str)
    finally:
        server.close()
    gone = OpenAIGenerator("x", "http://127.0.0.1:9/v1", timeout=2).generate(["hello"])[0]
    assert isinstance(gone, GenerationError) and "no answer" in gone.reason


@pytest.mark.parametrize("dtype", ["auto", "float32", "bfloat16"])
def test_a_generator_describes_its_replies_the_same_before_and_after_loading_the_model(dtype, tmp_path, monkeypatch):
    """The reply cache's key: a warm run must not load the model to build it, and the key must not
    change once the model is loaded (else every cached reply would be missed)."""
    monkeypatch.setenv("BIASAUDIT_CACHE_DIR", str(tmp_path))
    generator = LocalGenerator("tiny-random", GenerationSettings(max_new_tokens=4, dtype=dtype), device="cpu")
    before = generator.describe()
    assert generator._network is None, "describing needs no model"
    assert generator.tokens(["Yes", "No"]) and generator._network is None, "counting tokens needs the tokenizer only"
    generator._load()
    assert generator.describe() == before
