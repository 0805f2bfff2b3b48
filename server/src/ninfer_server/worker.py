"""The engine worker: one thread owns the batch-1 engine and runs queued requests one at a time.

Async handlers submit a :class:`Job`; chunks come back on the job's asyncio queue through
``loop.call_soon_threadsafe``. Each job carries a ``threading.Event`` that the handler sets when its
client goes away; the worker then stops that request within one decode step. A failure in one
request is reported to that request only: the worker and the other requests go on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from ninfer.errors import NinferError

log = logging.getLogger("ninfer.server")


class QueueFullError(Exception):
    """More requests are waiting than the server was told to queue."""


@dataclass
class Job:
    id: str
    prompt_ids: list[int]
    params: object  # ninfer.SamplingParams
    loop: asyncio.AbstractEventLoop
    results: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancel: threading.Event = field(default_factory=threading.Event)

    def send(self, kind: str, value=None) -> None:
        """From the worker thread: hand ("chunk" | "error" | "done", value) to the handler's loop."""
        try:
            self.loop.call_soon_threadsafe(self.results.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is closed: the server is shutting down
            self.cancel.set()


class EngineWorker:
    def __init__(self, llm, max_queue: int = 16):
        self.llm = llm
        self.waiting: queue.Queue[Job] = queue.Queue(maxsize=max_queue)
        self.counters = {"requests": 0, "completed": 0, "cancelled": 0, "failed": 0, "generated_tokens": 0}
        self.running: dict | None = None  # the request the engine is on now
        self.recent: collections.deque = collections.deque(maxlen=32)  # finished requests, newest last
        self.thread = threading.Thread(target=self._run, name="ninfer-engine", daemon=True)
        self.thread.start()

    def submit(self, job: Job) -> None:
        try:
            self.waiting.put_nowait(job)
        except queue.Full:
            raise QueueFullError(
                f"The server is busy: {self.waiting.maxsize} requests are already waiting; "
                "retry later or start it with a larger --max-queue.") from None
        self.counters["requests"] += 1

    def metrics(self) -> dict:
        return {**self.counters, "queued": self.waiting.qsize(), "running": self.running,
                "recent": list(self.recent)}

    def _run(self) -> None:
        while True:
            job = self.waiting.get()
            record = {"id": job.id, "prompt_tokens": len(job.prompt_ids), "generated_tokens": 0,
                      "finish_reason": None, "started": time.time()}
            self.running = record
            error = None
            try:
                self._generate(job, record)
            except NinferError as e:  # bad input found by the engine: the client's error
                record["finish_reason"] = "rejected"
                error = e
            except Exception as e:  # a real internal error: log it, tell this client, keep serving
                log.exception("request %s failed", job.id)
                record["finish_reason"] = "error"
                self.counters["failed"] += 1
                error = e
            finally:
                # the books first: a client answered (the error ends its handler at once) sees them in /metrics
                self.running = None
                record["seconds"] = round(time.time() - record.pop("started"), 3)
                self.recent.append(record)
                if record["finish_reason"] in ("stop", "length", "cancelled"):
                    self.counters["cancelled" if record["finish_reason"] == "cancelled" else "completed"] += 1
                if error is not None:
                    job.send("error", error)
                job.send("done")

    def _generate(self, job: Job, record: dict) -> None:
        if job.cancel.is_set():  # the client left while waiting in the queue
            record["finish_reason"] = "cancelled"
            return
        stream = self.llm.generate_stream(job.prompt_ids, job.params, job.cancel)
        try:
            for chunk in stream:
                n = len(chunk.token_ids)
                record["generated_tokens"] += n
                self.counters["generated_tokens"] += n
                if chunk.finish_reason:
                    record["finish_reason"] = chunk.finish_reason
                    _log_stats(job.id, chunk.stats or {}, record)
                if job.cancel.is_set() and not chunk.finish_reason:
                    record["finish_reason"] = "cancelled"  # the engine would stop next step; stop now
                    return
                job.send("chunk", chunk)
        finally:
            stream.close()


def _log_stats(job_id, stats: dict, record: dict) -> None:
    """One line per finished request: speeds, and with drafters tokens per step and acceptance."""
    line = (f"request {job_id}: prompt {stats.get('prompt_tokens', 0)} tok "
            f"({stats.get('prefill_tok_s', 0.0):.0f} tok/s), generated {stats.get('generated_tokens', 0)} tok "
            f"({stats.get('decode_tok_s', 0.0):.1f} tok/s)")
    if stats.get("drafted_tokens"):
        steps = max(stats.get("verify_steps", 0), 1)
        record["tokens_per_step"] = round(stats["generated_tokens"] / steps, 3)
        record["acceptance"] = round(stats["accepted_tokens"] / stats["drafted_tokens"], 3)
        line += f", {record['tokens_per_step']:.2f} tok/step, acceptance {record['acceptance']:.0%}"
    log.info(line)
