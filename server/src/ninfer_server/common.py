"""What both APIs' routes share: body decoding, the model check, disconnect-aware collection, SSE."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import AsyncIterator, Callable

import msgspec
from litestar import Request, Response
from litestar.background_tasks import BackgroundTask
from litestar.response import Stream

from .errors import APIError, sse_error
from .generation import Event, Plan, run, submit


@dataclass
class ServerState:
    llm: object
    worker: object
    model_names: list[str]  # the first is the one reported; any of them may be asked for
    api_key: str | None = None
    keepalive_s: float = 10.0


def server_of(request: Request) -> ServerState:
    return request.app.state["server"]


async def decode_body(request: Request, schema: type):
    """The JSON body as ``schema``; malformed JSON and wrong or missing fields are 400s."""
    body = await request.body()
    try:
        return msgspec.json.decode(body, type=schema)
    except msgspec.ValidationError as e:
        where = re.search(r"at `\$\.?([^`]*)`", str(e))
        raise APIError(400, f"Invalid request: {e}.", where.group(1) if where else None) from None
    except msgspec.DecodeError as e:
        raise APIError(400, f"The request body is not valid JSON ({e}); send a JSON object.") from None


def check_model(server: ServerState, model: str) -> str:
    if model not in server.model_names:
        raise APIError(404, f"The model `{model}` does not exist; this server serves "
                            f"{', '.join(repr(n) for n in server.model_names)}.", "model", "model_not_found")
    return model  # the name asked for, as an alias's client expects it back


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def collect(request: Request, server: ServerState, plan: Plan) -> list[Event] | None:
    """Run a non-streaming request; None if the client left (its generation is then cancelled)."""
    job = submit(server.worker, plan)

    async def consume() -> list[Event]:
        return [ev async for ev in run(server.worker, job, plan, server.keepalive_s) if ev.kind != "keepalive"]

    work = asyncio.ensure_future(consume())
    gone = asyncio.ensure_future(_disconnected(request))
    await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    if work.done():
        gone.cancel()
        return work.result()
    job.cancel.set()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work
    return None


def first_error(events: list[Event]) -> None:
    for ev in events:
        if ev.kind == "error":
            raise ev.error


def sse_response(request: Request, server: ServerState, plan: Plan,
                 frames: Callable[[AsyncIterator[Event]], AsyncIterator[bytes]]) -> Stream:
    """Stream ``frames(events)``; a failure after the stream began ends it with an error event."""
    job = submit(server.worker, plan)  # a full queue is a 429 here, before the stream starts
    path = request.url.path

    async def body() -> AsyncIterator[bytes]:
        try:
            async for frame in frames(run(server.worker, job, plan, server.keepalive_s)):
                yield frame
        except APIError as e:
            yield sse_error(path, e)
        except Exception:  # a bug in formatting: log it, end the stream with an error event
            request.logger.exception("stream failed on %s", path)
            yield sse_error(path, APIError(500, "The server failed while streaming; see its log."))
        finally:
            job.cancel.set()

    # the background task also covers a client gone before the body generator ever started
    return Stream(body(), media_type="text/event-stream", background=BackgroundTask(job.cancel.set),
                  headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def gone_response() -> Response:
    return Response(content=b"", status_code=499)  # nginx's "client closed request"; nobody reads it
