"""The litestar app: routes of both APIs, API-key check, error shapes, health and metrics."""

from __future__ import annotations

import hmac

from litestar import Litestar, Request, Response, get
from litestar.datastructures import State

from . import anthropic_api, openai_api
from .common import ServerState, server_of
from .errors import APIError, error_response, exception_handler

OPEN_PATHS = {"/health"}


@get("/health")
async def health(request: Request) -> Response:
    server = server_of(request)
    return Response({"status": "ok", "model": server.model_names[0]})


@get("/metrics")
async def metrics(request: Request) -> Response:
    """The engine's counters: requests, tokens generated, cancellations, the queue, recent requests."""
    server = server_of(request)
    return Response({"model": server.model_names[0], **server.worker.metrics()})


def _key_of(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("x-api-key", "")


def create_app(server: ServerState) -> Litestar:
    async def check_key(request: Request) -> Response | None:
        if server.api_key is None or request.url.path in OPEN_PATHS:
            return None
        if hmac.compare_digest(_key_of(request).encode(), server.api_key.encode()):
            return None
        return error_response(request.url.path, APIError(
            401, "Invalid or missing API key; send it as `Authorization: Bearer KEY` or `x-api-key: KEY`.",
            code="invalid_api_key"))

    return Litestar(
        route_handlers=[health, metrics, openai_api.list_models, openai_api.get_model, openai_api.chat_completions,
                        openai_api.completions, anthropic_api.messages, anthropic_api.count_tokens],
        state=State({"server": server}),
        before_request=check_key,
        exception_handlers={Exception: exception_handler},
        request_max_body_size=256 * 1024 * 1024,  # long agent conversations are large
        openapi_config=None,
    )
