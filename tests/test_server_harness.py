"""A real `ninfer serve` subprocess on 127.0.0.1 for the server tests (no tests here)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``ninfer serve`` on the default model with ``args``; ``url`` is its base URL."""

    def __init__(self, *args: str, api_key: str | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, NINFER_LOG_LEVEL="WARNING")
        env.pop("NINFER_API_KEY", None)
        cmd = [sys.executable, "-c", "from ninfer.cli import main; main()", "serve", "--port", str(self.port),
               "--max-context", "512", *args] + (["--api-key", api_key] if api_key else [])
        self.log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a full pipe would block the server
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"ninfer serve exited: {self.log.read()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("ninfer serve did not answer /health within 180 s")

    def metrics(self, key: str | None = None) -> dict:
        return httpx.get(self.url + "/metrics", headers={"x-api-key": key or ""}, timeout=10).json()

    def wait_idle(self, key: str | None = None, timeout: float = 60) -> dict:
        """Metrics once nothing runs or waits (so the previous request's record is final)."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics(key)
            if (m["running"] is None and m["queued"] == 0) or time.time() > deadline:
                return m
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def engine_tokenizer_and_template():
    """The tokenizer and chat template the engine uses, read from the same checkpoint."""
    from ninfer.chat.template import ChatTemplate
    from ninfer.weights import open_checkpoint
    from ninfer_testing import smollm2_path

    ckpt = open_checkpoint(smollm2_path())
    st = ckpt.special_tokens()
    return ckpt.tokenizer(), ChatTemplate(ckpt.chat_template, st.get("bos_token"), st.get("eos_token"))
