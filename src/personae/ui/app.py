"""The viewer's ASGI app (Starlette): GET-only routes, loopback Host only, strict CSP.

Pages are rendered on the server; ``/static/app.js`` (a few lines of vanilla
JS from the package) refreshes a running run through server-sent events and
polls the runs list and chain graphs while something runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path

import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from personae.errors import PersonaeError, UnknownNameError, UsageError
from personae.store.runs import RunStatus
from personae.ui import chains, compare, pages
from personae.ui._html import h, layout
from personae.ui.data import Reader

__all__ = ["LOOPBACK_HOSTS", "create_app"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
"""Host header names the app answers (anything else could be DNS rebinding)."""

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
_STATIC = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}
_POLL = 0.5
_STREAM_LIFETIME = 300.0
_KEEPALIVE = 15.0


class _Guard:
    """ASGI middleware: refuses foreign Host headers; adds the security headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        name = host if host.endswith("]") else host.rsplit(":", 1)[0]
        if name not in LOOPBACK_HOSTS:
            refused = PlainTextResponse("personae ui answers on 127.0.0.1 only", status_code=403)
            await refused(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = _CSP
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "no-referrer"
                headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_secured)


def _error_page(status: int, message: str) -> HTMLResponse:
    body = f'<p class="warning">{h(message)}</p><p><a href="/">back to the runs</a></p>'
    return HTMLResponse(layout("Not found" if status == 404 else "Error", body), status)


def _page(render: Callable[[Request], str]) -> Callable[[Request], Response]:
    """An endpoint serving ``render``'s HTML; a bad name is a 404 page, other errors 500."""

    def endpoint(request: Request) -> Response:
        try:
            return HTMLResponse(render(request))
        except UnknownNameError as exc:
            return _error_page(404, str(exc))
        except UsageError as exc:
            return _error_page(404, str(exc))
        except PersonaeError as exc:
            return _error_page(500, str(exc))

    return endpoint


def _params(request: Request) -> dict[str, str]:
    """The runs list's filters from the query string."""
    return {
        k: v for k, v in request.query_params.items() if k in ("status", "persona", "model", "q")
    }


def _run_id(request: Request) -> str:
    return str(request.path_params["run_id"])


def _static(request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in _STATIC:
        return PlainTextResponse("not found", status_code=404)
    text = (resources.files("personae.ui") / "static" / name).read_text(encoding="utf-8")
    return Response(text, media_type=_STATIC[name])


class _RunStream:
    """``/runs/{run_id}/stream``: server-sent ``changed`` events while a run runs, then ``end``."""

    def __init__(self, reader: Reader, stop: threading.Event) -> None:
        self.reader = reader
        self.stop = stop

    async def respond(self, request: Request) -> Response:
        """The stream of the run the path names (404 when there is none)."""
        try:
            first = await anyio.to_thread.run_sync(self.reader.run, _run_id(request))
        except PersonaeError as exc:
            return PlainTextResponse(str(exc), status_code=404)
        return StreamingResponse(
            self._events(first.run.id, first.signature), media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )  # fmt: skip

    async def _events(self, rid: str, seen: tuple[str, int, int]) -> AsyncIterator[str]:
        waited = quiet = 0.0
        yield f"event: changed\ndata: {json.dumps(list(seen))}\n\n"
        while waited < _STREAM_LIFETIME and seen[0] == RunStatus.RUNNING and not self.stop.is_set():
            await asyncio.sleep(_POLL)
            waited += _POLL
            quiet += _POLL
            view = await anyio.to_thread.run_sync(self.reader.run, rid)
            if view.signature != seen:
                seen, quiet = view.signature, 0.0
                yield f"event: changed\ndata: {json.dumps(list(seen))}\n\n"
            elif quiet >= _KEEPALIVE:
                quiet = 0.0
                yield ": keep-alive\n\n"
        if seen[0] != RunStatus.RUNNING:
            yield f"event: end\ndata: {json.dumps(seen[0])}\n\n"


def create_app(root: Path, *, stopping: threading.Event | None = None) -> Starlette:
    """The viewer app over the project at ``root`` (read-only).

    ``stopping`` is set by the server when it is asked to exit: open event
    streams then end at once instead of holding the shutdown up.
    """
    reader = Reader(root)
    stop = stopping or threading.Event()
    page, params, run_id = _page, _params, _run_id
    routes = [
        Route("/", page(lambda r: pages.runs_page(reader, params(r)))),
        Route("/fragments/runs", page(lambda r: pages.runs_table(reader, params(r)))),
        Route("/runs/{run_id}", page(lambda r: pages.run_page(reader.run(run_id(r))))),
        Route("/fragments/runs/{run_id}", page(lambda r: pages.run_body(reader.run(run_id(r))))),
        Route("/runs/{run_id}/stream", _RunStream(reader, stop).respond),
        Route(
            "/runs/{run_id}/calls/{seq:int}",
            page(lambda r: pages.call_page(reader.run(run_id(r)), int(r.path_params["seq"]))),
        ),
        Route(
            "/runs/{run_id}/calls/{seq:int}/diff",
            page(
                lambda r: compare.diff_page(
                    reader, run_id(r), int(r.path_params["seq"]), r.query_params.get("with")
                )
            ),
        ),
        Route(
            "/compare/{a}/{b}",
            page(lambda r: compare.compare_page(reader, r.path_params["a"], r.path_params["b"])),
        ),
        Route("/chains", page(lambda r: chains.chains_page(reader))),
        Route("/chains/{name}", page(lambda r: chains.chain_page(reader, r.path_params["name"]))),
        Route(
            "/chains/{name}/handovers/{step}",
            page(
                lambda r: chains.handover_page(reader, r.path_params["name"], r.path_params["step"])
            ),
        ),
        Route("/static/{name}", _static),
        Route("/healthz", lambda r: PlainTextResponse("ok")),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            reader.close()

    app = Starlette(routes=routes, middleware=[Middleware(_Guard)], lifespan=lifespan)
    app.state.reader = reader
    return app
