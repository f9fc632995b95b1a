"""Asking chat models: batched greedy decoding equals one prompt at a time, seeded sampling repeats,
the reply cache asks nothing twice (also after a crash), and an OpenAI-compatible server on
127.0.0.1 is reached over real HTTP, its failures turned into errors that count as unprocessable."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from biasaudit.lm import openai_http
from biasaudit.lm.generate import (
    reply_text,
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
        remote = OpenAIGenerator("tiny-served", server.url, GenerationSettings(max_new_tokens=4), retries=0)
        first, second = remote.generate(PROMPTS[:2])
        assert isinstance(first, GenerationError) and "503" in first.reason and isinstance(second, str)
    finally:
        server.close()
    gone = OpenAIGenerator("x", "http://127.0.0.1:9/v1", timeout=2, retries=1, backoff_s=0).generate(["hello"])[0]
    assert isinstance(gone, GenerationError) and "no answer" in gone.reason


def test_a_busy_server_is_asked_again_after_a_pause(local):
    server = Server(local, fail_first=2)
    pauses = []
    try:
        remote = OpenAIGenerator("tiny-served", server.url, GenerationSettings(max_new_tokens=4), retries=2)
        remote_post = openai_http.post_json
        reply = remote_post(remote._client, f"{server.url}/chat/completions",
                            {"messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 4},
                            retries=2, backoff_s=0.5, sleep=pauses.append)
        assert reply["choices"][0]["message"]["content"] == local.generate(PROMPTS[:1], max_new_tokens=4)[0]
        assert pauses == [0.5, 1.0], "two 503s, each followed by a doubling pause"
        assert isinstance(remote.generate(PROMPTS[1:2])[0], str) and len(server.requests) == 4
    finally:
        server.close()


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


def _greedy_by_hand(local: LocalGenerator, text: str, steps: int) -> tuple[str, bool]:
    """Greedy decoding one token at a time from the logits (no `generate`, no padding, no batch)."""
    ids, ended = _greedy_ids(local, text, steps)
    text = local._tokenizer.decode(ids, skip_special_tokens=True)
    return (text if ended else text.rstrip("\ufffd")), ended  # a reply cut at the limit: whole characters only


def _greedy_ids(local: LocalGenerator, text: str, steps: int) -> tuple[list[int], bool]:
    import torch

    network, tokenizer = local._load()
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(steps):
            token = int(network(torch.cat([ids, torch.tensor([new], dtype=ids.dtype)], dim=1)).logits[0, -1].argmax())
            if token in local._stop_ids():
                return new, True
            new.append(token)
    return new, False


def test_conversations_are_answered_as_greedy_decoding_by_hand(local):
    conversations = [[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": p}]
                     for p in PROMPTS]
    tokenizer = local._tokenizer_only()
    for steps in (1, 3, 12):
        replies = local.converse(conversations, max_new_tokens=steps)
        texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]
        assert replies == [_greedy_by_hand(local, text, steps) for text in texts]
    # The random model never picks its end-of-turn ids: make one of the tokens it does pick a stop.
    stopping = LocalGenerator("tiny", local.settings, network=local._network, tokenizer=local._tokenizer, chat=True)
    third = _greedy_ids(local, texts[0], 3)[0][2]
    stopping._stops = sorted({*local._stop_ids(), third})
    ended = stopping.converse(conversations, max_new_tokens=12)
    assert ended == [_greedy_by_hand(stopping, text, 12) for text in texts]
    assert ended[0][1] and not replies[0][1], "a reply the model ended is told from one cut off"
    one_turn = local.converse([[{"role": "user", "content": p}] for p in PROMPTS])
    assert [text.strip() for text, _ in one_turn] == local.generate(PROMPTS), "a prompt is a one-message conversation"


def test_a_model_without_chat_template_cannot_converse(local):
    from biasaudit.lm.tiny import train_tokenizer

    plain = train_tokenizer(add_bos=False)
    plain.chat_template = None
    generator = LocalGenerator("tiny", local.settings, network=local._network, tokenizer=plain)
    with pytest.raises(ValueError, match="no chat template"):
        generator.converse([[{"role": "user", "content": "hi"}]])


def test_a_reply_cut_inside_a_character_keeps_whole_characters(tiny_lm):
    _, tokenizer = tiny_lm  # byte-level, trained on the fly: a Devanagari character spans several tokens
    text = "क्या समान काम के लिए पुरुष"
    ids = tokenizer.encode(text, add_special_tokens=False)
    cut = [k for k in range(1, len(ids)) if tokenizer.decode(ids[:k]).endswith("\ufffd")]
    assert cut, "some prefix ends inside a character"
    for k in cut:
        reply = reply_text(tokenizer, ids[:k], finished=False)
        assert "\ufffd" not in reply and text.startswith(reply)
    assert reply_text(tokenizer, ids, finished=True) == text
    assert reply_text(tokenizer, ids[:cut[0]], finished=True).endswith("\ufffd")  # a finished reply is left as it is
