"""`ninfer serve`: added to the ninfer CLI through the ``ninfer_register_commands`` hook."""

from __future__ import annotations

import logging
import os

import click

from ninfer import hookimpl
from ninfer.cli import describe_formats, load_llm, load_options


@hookimpl
def ninfer_register_commands(cli):
    @cli.command()
    @load_options
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind; 0.0.0.0 for all.")
    @click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
    @click.option("--api-key", envvar="NINFER_API_KEY", default=None,
                  help="Require this key on every route but /health (env NINFER_API_KEY).")
    @click.option("--served-model-name", multiple=True,
                  help="Name clients ask for (repeat for aliases; default: the model file's name).")
    @click.option("--max-queue", type=int, default=16, show_default=True,
                  help="Requests that may wait behind the running one; more get 429.")
    @click.option("--draft", default=None, help='Speculative drafters, e.g. "lookup", "mtp:3".')
    @click.option("--keepalive", type=float, default=10.0, show_default=True,
                  help="Seconds between SSE keep-alive comments while a stream waits.")
    def serve(model, backend, host, port, api_key, served_model_name, max_context, max_queue, draft, keepalive):
        """Serve a model over OpenAI- and Anthropic-compatible HTTP."""
        import uvicorn

        from .app import create_app
        from .common import ServerState
        from .worker import EngineWorker

        if max_queue < 1:
            raise click.BadParameter("must be at least 1", param_hint="--max-queue")
        _check_can_listen(host, port)  # before the model loads (minutes for a 27B), not after
        logging.basicConfig(level=os.environ.get("NINFER_LOG_LEVEL", "INFO"))
        kw = {"draft": draft} if draft is not None else {}
        llm = load_llm(model, backend, max_context, progress=False, **kw)
        names = list(served_model_name) or [llm.model_name]
        state = ServerState(llm, EngineWorker(llm, max_queue), names, api_key or None, keepalive)
        click.echo(f"serving {names[0]} ({llm.backend}, context {llm.max_context} tokens, {describe_formats(llm)}) "
                   f"on http://{host}:{port}", err=True)
        uvicorn.run(create_app(state), host=host, port=port, timeout_keep_alive=75, log_level="warning")


def _check_can_listen(host: str, port: int) -> None:
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise click.BadParameter(f"{host!r} is not an address here ({e.strerror})", param_hint="--host") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        try:
            s.bind(addr)
        except OSError as e:
            raise click.ClickException(f"Cannot listen on {host}:{port} ({e.strerror}); pick another --port, or "
                                       "stop what uses it.") from None
