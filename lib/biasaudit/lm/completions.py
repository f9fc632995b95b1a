"""The `completions` engine: prompt log-probs from an OpenAI-compatible `/v1/completions` server.

vLLM (`vllm serve`) and SGLang serve a model this way on a cluster. The prompt is sent as token ids
(the project's own tokenization, start token included), with `echo` so that the answer carries the
prompt's tokens, `logprobs` so that each carries its log-prob, and `max_tokens` 1 (the one generated
token is dropped). Prompts go `batch` at a time in one request (the API takes a list of token lists);
the answers are put back in order by their `index`. A server that answers without prompt log-probs is
an error that says how to get them, never a silent zero.
"""

from __future__ import annotations

import httpx

from biasaudit.lm.engines import EngineError, Logprobs, PromptLogprobEngine
from biasaudit.lm.openai_http import HTTPFailure, client, post_json


class CompletionsEngine(PromptLogprobEngine):
    """A model behind `{base_url}/completions` (`base_url` such as http://host:8000/v1)."""

    name = "completions"

    def __init__(self, model: str, base_url: str, *, api_key_env: str = "OPENAI_API_KEY", timeout: float = 120.0,
                 retries: int = 4, backoff_s: float = 1.0, batch: int = 32, served_name: str | None = None,
                 precision: str = ""):
        super().__init__(model)
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/completions"
        self.served_name = served_name or model
        self.dtype = precision  # as declared: a server does not say what it computes in
        self.retries, self.backoff_s, self.batch = retries, backoff_s, batch
        self._client = client(api_key_env=api_key_env, timeout=timeout)

    def describe(self) -> dict:
        return {**super().describe(), "url": self.url}  # never the key

    def close(self) -> None:
        self._client.close()

    def prompt_logprobs(self, prompts: list[list[int]]) -> Logprobs:
        out: Logprobs = []
        for start in range(0, len(prompts), self.batch):
            out += self._batch(prompts[start:start + self.batch])
        return out

    def _batch(self, prompts: list[list[int]]) -> Logprobs:
        body = {"model": self.served_name, "prompt": prompts, "echo": True, "logprobs": 1, "max_tokens": 1,
                "temperature": 0.0}
        try:
            answer = post_json(self._client, self.url, body, retries=self.retries, backoff_s=self.backoff_s)
        except HTTPFailure as err:
            raise EngineError(f"completions engine, model {self.model}: {err}{self._served_hint(err)}") from None
        choices = answer.get("choices")
        if not isinstance(choices, list) or len(choices) != len(prompts):
            raise EngineError(f"{self.url}: expected {len(prompts)} choices, got "
                              f"{len(choices) if isinstance(choices, list) else repr(choices)[:100]}")
        by_index = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        return [self._prompt_part(choice, ids) for choice, ids in zip(by_index, prompts)]

    def _prompt_part(self, choice: dict, ids: list[int]) -> list[float | None]:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        if not isinstance(values, list) or len(values) < len(ids) or all(v is None for v in values[1:len(ids)]):
            raise EngineError(
                f"{self.url} returned no prompt log-probs for model {self.served_name} (a prompt of {len(ids)} tokens "
                f"came back with {'none' if not isinstance(values, list) else len(values)}): the server must support "
                "`echo` with `logprobs` on /v1/completions, as vLLM and SGLang do; a chat-only endpoint is not enough")
        return [None, *values[1:len(ids)]]

    def _served_hint(self, err: HTTPFailure) -> str:
        """Where the server answered 404, the names it serves, so the run's error says what to set."""
        if err.status != 404:
            return ""
        try:
            listed = self._client.get(self.base_url + "/models").json().get("data", [])
            names = sorted(str(m.get("id")) for m in listed if isinstance(m, dict))
        except (httpx.HTTPError, ValueError, AttributeError):
            names = []
        served = f"; it serves {', '.join(repr(n) for n in names)}" if names else ""
        return (f". The server knows no model named {self.served_name!r}{served}: start it with --served-model-name "
                f"{self.served_name}, or name the model it serves in the params (engine_served_names: "
                f"{{{self.model}: <name>}})")
