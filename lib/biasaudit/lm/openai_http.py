"""JSON over HTTP to OpenAI-compatible servers (chat and completions), through httpx.

One client per server and run (connections reused), a timeout on every request, and retries with
exponential backoff where retrying can help: no answer, HTTP 429 (rate limited, honouring
`Retry-After`) and 5xx. Any other error reply is final. The API key is read from an environment
variable and only ever sent in the Authorization header, never logged or stored.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import httpx

MAX_WAIT_S = 60.0


class HTTPFailure(RuntimeError):
    """A request that got no usable answer, after the retries; `status` is the last HTTP status, if any."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def client(*, api_key_env: str, timeout: float) -> httpx.Client:
    """A client that sends the key of `api_key_env` when that variable is set (servers without a key need none)."""
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.Client(timeout=httpx.Timeout(timeout), headers=headers)


def post_json(session: httpx.Client, url: str, body: dict, *, retries: int = 4, backoff_s: float = 1.0,
              sleep: Callable[[float], None] = time.sleep) -> dict:
    """The JSON answer to `body` posted at `url`; HTTPFailure when none came after `retries` retries."""
    failure = HTTPFailure(f"no request was made to {url}")
    for attempt in range(retries + 1):
        wait = min(backoff_s * 2 ** attempt, MAX_WAIT_S)
        try:
            response = session.post(url, json=body)
        except httpx.TransportError as err:  # connection refused or reset, timeouts
            failure = HTTPFailure(f"no answer from {url} ({type(err).__name__}: {err})")
        else:
            status = response.status_code
            if status == 429 or status >= 500:
                failure = HTTPFailure(f"{url} answered HTTP {status}: {response.text[:200]}", status)
                wait = _retry_after(response, wait)
            elif response.is_error:
                raise HTTPFailure(f"{url} answered HTTP {status}: {response.text[:300]}", status)
            else:
                try:
                    answer = response.json()
                except ValueError:
                    raise HTTPFailure(f"{url} answered with something other than JSON: {response.text[:200]!r}",
                                      status) from None
                if not isinstance(answer, dict):
                    raise HTTPFailure(f"{url} answered with JSON that is not an object: {str(answer)[:200]}", status)
                return answer
        if attempt < retries:
            sleep(wait)
    raise failure


def _retry_after(response: httpx.Response, default: float) -> float:
    try:
        return min(max(float(response.headers.get("Retry-After", default)), 0.0), MAX_WAIT_S)
    except ValueError:  # an HTTP date instead of seconds: keep the backoff
        return default
