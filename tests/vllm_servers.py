"""vLLM servers for tests/test_vllm.py, started as soon as the tests are collected: a server takes about
a minute to start on two cores, mostly importing vLLM, and the tests before test_vllm.py run meanwhile.

A server is `python -m vllm.entrypoints.openai.api_server` of the vLLM environment (.venv-vllm, `make
vllm`) as README.md gives it for a CPU, serving SmolLM2 in fp32 on a free port of 127.0.0.1. Two are
started: one the tests score through (and one test kills), one the killed run resumes on.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from biasaudit.lm.registry import resolve_model_path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
READY = ROOT / ".venv-vllm" / ".installed"  # written last by `make vllm`
MODEL = "smollm2-135m"
START_LIMIT_S = 1800  # a server not answering after this long is hung, not slow (a busy machine is slower)
NAMES = ("first", "second")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One vLLM server process; `ready()` waits until it answers /v1/models."""

    def __init__(self, log: Path):
        self.port, self.log = free_port(), log
        self.url = f"http://127.0.0.1:{self.port}/v1"
        command = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", resolve_model_path(MODEL),
                   "--served-model-name", MODEL, "--dtype", "float32", "--max-model-len", "512",
                   "--no-enable-prefix-caching", "--enforce-eager", "--host", "127.0.0.1", "--port", str(self.port)]
        self.started = time.time()
        self.up_after: float | None = None
        self.process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})

    def ready(self) -> "Server":
        """The server once it answers (asked first: it may have been up for long), or an error with its log."""
        while self.up_after is None:
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    self.up_after = time.time() - self.started
                    print(f"vLLM server answering {self.up_after:.0f} s after it was started", file=sys.stderr)
                    break
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"the vLLM server exited ({self.process.returncode}): {self.log.read_text()[-3000:]}")
            if time.time() - self.started > START_LIMIT_S:
                self.stop()
                raise RuntimeError(f"the vLLM server did not answer in {START_LIMIT_S} s: {self.log.read_text()[-3000:]}")
            time.sleep(1)
        return self

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def available() -> bool:
    return READY.exists()


class Servers:
    """The session's servers, started once when test_vllm.py's tests are collected."""

    def __init__(self):
        self.running: dict[str, Server] = {}

    def start(self) -> None:
        if self.running or not available():
            return
        folder = Path(tempfile.mkdtemp(prefix="vllm-servers-"))
        self.running = {name: Server(folder / f"{name}.log") for name in NAMES}

    def get(self, name: str) -> Server:
        self.start()
        return self.running[name].ready()

    def stop(self) -> None:
        for server in self.running.values():
            server.stop()


SERVERS = Servers()
