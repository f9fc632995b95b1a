"""A small OpenAI-compatible /v1/completions server on 127.0.0.1 for the completions engine's tests.

It answers with a real model (one of the tiny test models) in the OpenAI format: `echo` puts the
prompt's tokens first in `logprobs.tokens` / `token_logprobs` (entry 0 null), then one generated
token. Its log-probs are computed here, one prompt at a time, straight from the model's logits, not
by the project's code. `mode` makes it misbehave the ways real servers do."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


class CompletionsServer:
    """`mode`: "ok"; "no_logprobs" (logprobs null, as a server without prompt log-probs);
    "busy" (HTTP 503, then 429 with Retry-After, before answering); "wrong" (another model's numbers).
    With `served_name`, a request for another model gets vLLM's 404 and /v1/models lists that name."""

    def __init__(self, model, tokenizer, *, mode: str = "ok", other_model=None, served_name: str | None = None):
        self.model, self.tokenizer, self.mode, self.other = model, tokenizer, mode, other_model
        self.served_name = served_name
        self.requests: list[dict] = []
        self.refusals = 2 if mode == "busy" else 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _json(self, status: int, payload: dict):
                answer = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self):
                if self.path == "/v1/models" and server.served_name:
                    self._json(200, {"object": "list", "data": [{"id": server.served_name, "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "Not Found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if server.refusals:
                    server.refusals -= 1
                    status = 503 if server.refusals else 429
                    self.send_response(status)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(b"busy")
                    return
                if self.path != "/v1/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                if server.served_name and body.get("model") != server.served_name:
                    self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                               "type": "NotFoundError", "code": 404}})
                    return
                answer = json.dumps(server.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    @torch.inference_mode()
    def _logprobs(self, ids: list[int]) -> tuple[list, int, float]:
        model = self.other if self.mode == "wrong" else self.model
        logits = model(torch.tensor([ids])).logits[0].double()
        logprobs = torch.log_softmax(logits, dim=-1)
        values = [None] + [float(logprobs[p - 1, ids[p]]) for p in range(1, len(ids))]
        generated = int(logprobs[-1].argmax())
        return values, generated, float(logprobs[-1, generated])

    def answer(self, body: dict) -> dict:
        prompts = body["prompt"]
        prompts = [prompts] if prompts and isinstance(prompts[0], int) else prompts
        choices = []
        for index, ids in enumerate(prompts):
            values, generated, generated_lp = self._logprobs(ids)
            tokens = [self.tokenizer.decode([i]) for i in [*ids, generated]]
            logprobs = None if self.mode == "no_logprobs" else {
                "tokens": tokens, "token_logprobs": [*values, generated_lp],
                "top_logprobs": [None, *[{t: v} for t, v in zip(tokens[1:], values[1:])], {tokens[-1]: generated_lp}],
                "text_offset": list(range(len(tokens)))}
            choices.append({"index": index, "text": tokens[-1], "logprobs": logprobs, "finish_reason": "length"})
        choices.reverse()  # a server need not answer in order: the engine sorts by index
        return {"id": "cmpl-test", "object": "text_completion", "model": body["model"], "choices": choices}
