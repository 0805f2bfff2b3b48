"""API errors and their two wire shapes: OpenAI's and Anthropic's."""

from __future__ import annotations

import json

from litestar import Request, Response

# HTTP status -> (OpenAI type, Anthropic type)
ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request_error"),
    401: ("invalid_request_error", "authentication_error"),
    404: ("invalid_request_error", "not_found_error"),
    405: ("invalid_request_error", "invalid_request_error"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("requests", "rate_limit_error"),
    500: ("server_error", "api_error"),
}


class APIError(Exception):
    """An error a route answers with; ``str(e)`` is the message the client sees."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def openai_body(self) -> dict:
        kind = ERROR_TYPES.get(self.status, ERROR_TYPES[500])[0]
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def anthropic_body(self) -> dict:
        kind = ERROR_TYPES.get(self.status, ERROR_TYPES[500])[1]
        return {"type": "error", "error": {"type": kind, "message": self.message}}


def is_anthropic(path: str) -> bool:
    return path.startswith("/v1/messages")


def error_response(request_path: str, err: APIError) -> Response:
    body = err.anthropic_body() if is_anthropic(request_path) else err.openai_body()
    headers = {"Retry-After": "1"} if err.status == 429 else None  # the SDKs wait this long, then retry
    return Response(content=body, status_code=err.status, media_type="application/json", headers=headers)


def sse_error(path: str, err: APIError) -> bytes:
    """The event that ends a stream that failed after it began."""
    if is_anthropic(path):
        return b"event: error\ndata: " + json.dumps(err.anthropic_body()).encode() + b"\n\n"
    return b"data: " + json.dumps(err.openai_body()).encode() + b"\n\n"


def exception_handler(request: Request, exc: Exception) -> Response:
    """Every exception a route lets out becomes the API's error shape; only real bugs are 500."""
    if isinstance(exc, APIError):
        return error_response(request.url.path, exc)
    status = getattr(exc, "status_code", 500)
    if status >= 500:
        request.logger.exception("internal error on %s", request.url.path)
        return error_response(request.url.path, APIError(500, "The server failed on this request; see its log."))
    detail = getattr(exc, "detail", "") or "bad request"
    if status == 404:
        detail = f"There is no route {request.method} {request.url.path}."
    if status == 405:
        detail = f"{request.method} is not allowed on {request.url.path}."
    return error_response(request.url.path, APIError(status, detail))
