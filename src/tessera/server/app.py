"""The pushdown server as an ASGI application (starlette): routes, authentication, limits,
metrics and structured logs. :func:`create_app` builds it; ``tessera serve`` runs it on
uvicorn.

Routes:

- ``GET /v1/health/live``: ``{"status": "live"}`` while the process answers; ``GET
  /v1/health`` is the same (``{"status": "ok"}``). No token needed (for load balancers).
- ``GET /v1/health/ready``: 200 ``{"status": "ready"}`` when the served root can be listed
  (probed at most every 5 s, :mod:`tessera.server.health`), else 503 with the reason. No
  token needed.
- ``GET /v1/info``: version, protocol, served root, limits and handlers.
- ``GET /metrics``: Prometheus text.
- ``POST /v1/read``: a batch of tile and cell reads (:mod:`tessera.pushdown.read_items`).
- ``POST /v1/infer``: the frozen layers of a registered model on samples of an array
  (:mod:`tessera.pushdown.infer_items`, :mod:`tessera.server.infer`); only when the server
  has a models folder. Handlers are listed in :mod:`tessera.server.handlers` and admitted
  alike.

Every route but health needs ``Authorization: Bearer <token>`` unless the app was built
without a token (``--insecure-no-auth``, loopback only). Status codes: 400 malformed, 401
no or wrong token, 403 a key outside the served root, 404 unknown route (or model), 409
other weights than the client's, 408 a body that did not arrive within the body timeout,
413 over a limit, 422 unusable input (a damaged tile), 503 busy (with ``Retry-After``), 504
over the request timeout. A request's body is read before it is admitted, so slow clients
hold no slot; connection limits and the time allowed for headers are in
:mod:`tessera.server.connections`. Each response carries the
request's id in ``X-Request-ID`` (the client's, when it sent a sane one).

>>> import tessera
>>> app = create_app(tessera.open_store("memory://doc-serve"), token="s3cret-token-123456")
>>> app.state.pushdown.limits.max_items
256
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tessera.config import ServerConfig
from tessera.errors import ProtocolError
from tessera.pushdown.framing import PROTOCOL_VERSION, Limits
from tessera.server.cache import TileCache
from tessera.server.framed import HeldStream
from tessera.server.handlers import Handler, HandlerFn, Streamed, handler, handler_names
from tessera.server.health import Readiness
from tessera.server.metrics import ServerMetrics
from tessera.server.service import ReadService
from tessera.storage.blocking import Store

log = logging.getLogger("tessera.server")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class PushdownApp:
    """State of one server: its store, cache, limits, metrics and admission control."""

    def __init__(self, store: Store, config: ServerConfig, token: str | None) -> None:
        self.store = store
        self.config = config
        self.token = token.encode() if token is not None else None
        self.limits = Limits.of(config)
        self.cache = TileCache(config.cache_bytes)
        self.service = ReadService(store.aio, self.cache)
        #: The handlers this server serves (:mod:`tessera.server.handlers`), by name.
        self.handlers = {name: h for name in handler_names()
                         if (h := handler(name)).enabled(config)}
        self.info_sections: dict[str, Any] = {}
        self.metrics = ServerMetrics(histograms=tuple(self.handlers))
        self._by_path = {h.path: name for name, h in self.handlers.items()}
        self.readiness = Readiness(store.aio)
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self.in_flight = 0  # read requests admitted: being served or queued
        self.active = 0  # read requests holding a slot
        self.active_peak = 0

    # -- plumbing ------------------------------------------------------------------------
    async def handle(self, request: Request, route: str, auth: bool,
                     work: Callable[[Request, str], Awaitable[Response]]) -> Response:
        """Run one route with a request id, authentication, logs and metrics."""
        rid = request.headers.get("x-request-id", "")
        rid = rid if _REQUEST_ID.match(rid) else uuid.uuid4().hex[:16]
        t0 = time.perf_counter()
        bytes_in = 0
        if auth and not self._authorized(request):
            self.metrics.reject("auth")
            response: Response = _error(401, "missing or wrong bearer token",
                                        {"WWW-Authenticate": 'Bearer realm="tessera"'})
        else:
            try:
                response = await work(request, rid)
            except ClientDisconnect:
                response = _error(400, "the client went away before sending the whole body")
            bytes_in = int(request.scope.get("tessera.bytes_in", 0))
        response.headers["X-Request-ID"] = rid
        seconds = time.perf_counter() - t0
        out = int(response.headers.get("content-length", 0))
        self.metrics.observe(route, response.status_code, seconds, bytes_in=bytes_in,
                             bytes_out=out, histogram=self._by_path.get(route))
        log.info(json.dumps({"event": "request", "request_id": rid, "method": request.method,
                             "path": route, "status": response.status_code,
                             "seconds": round(seconds, 6), "bytes_in": bytes_in,
                             "bytes_out": out,
                             "client": request.client.host if request.client else None}))
        return response

    def _authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self.token)

    # -- routes --------------------------------------------------------------------------
    async def health(self, request: Request, rid: str) -> Response:
        return JSONResponse({"status": "ok"})

    async def live(self, request: Request, rid: str) -> Response:
        return JSONResponse({"status": "live"})

    async def ready(self, request: Request, rid: str) -> Response:
        ok, reason = await self.readiness.check()
        if ok:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)

    async def info(self, request: Request, rid: str) -> Response:
        from tessera._version import __version__

        return JSONResponse({
            "name": "tessera-pushdown", "version": __version__, "protocol": PROTOCOL_VERSION,
            "root": str(self.store.url), "handlers": list(self.handlers),
            "limits": {"max_body_bytes": self.limits.max_body_bytes,
                       "max_items": self.limits.max_items,
                       "max_output_bytes": self.limits.max_output_bytes,
                       "max_tile_bytes": self.limits.max_tile_bytes,
                       "max_concurrency": self.config.max_concurrency,
                       "queue": self.config.queue,
                       "request_timeout_s": self.config.request_timeout_s,
                       "body_timeout_s": self.config.body_timeout_s,
                       "max_connections": self.config.max_connections,
                       "max_connections_per_client":
                           self.config.max_connections_per_client},
            "cache_bytes": self.config.cache_bytes, "auth": self.token is not None,
            "pid": os.getpid(),  # which process answered (tessera serve --workers N)
            **{k: v() if callable(v) else v for k, v in self.info_sections.items()}})

    async def metrics_text(self, request: Request, rid: str) -> Response:
        stats = self.store.stats
        return PlainTextResponse(
            self.metrics.render(self.cache.hits, self.cache.misses, self.cache.nbytes,
                                self.in_flight, stats.bytes_received, stats.requests,
                                self.active_peak, self.readiness.ready),
            media_type="text/plain; version=0.0.4")

    async def admit(self, request: Request, rid: str, handler: Handler, run: HandlerFn,
                    ) -> Response:
        """Serve one request of a handler: its body first (the body limit, 413, and the body
        timeout, 408: a slow or stalled client holds no slot), then the queue (503 beyond
        it), a slot (shared by all handlers), the timeout (504), and the statuses of
        malformed requests; written once for every handler."""
        cfg = self.config
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        if self.in_flight >= cfg.max_concurrency + cfg.queue:
            self.metrics.reject("busy")
            return _error(503, f"the server is busy ({self.in_flight} requests in flight); "
                               "retry shortly", {"Retry-After": "1"})
        self.in_flight += 1
        handed = False  # a streamed answer holds its slot and its place until it is sent
        try:
            try:
                async with asyncio.timeout(cfg.request_timeout_s) as limit:
                    await self._slots.acquire()
                    self.active += 1
                    self.active_peak = max(self.active_peak, self.active)
                    try:
                        answer = await run(body, rid)
                        if isinstance(answer, Streamed):  # its slot is released once sent
                            handed = True
                            return self._held(answer, limit.when() or 0.0, rid, handler)
                        return answer
                    finally:
                        if not handed:
                            self.active -= 1
                            self._slots.release()
            except ProtocolError as err:
                self.metrics.reject({400: "bad_request", 403: "forbidden", 404: "not_found",
                                     409: "conflict", 413: "too_large", 422: "unprocessable",
                                     503: "busy"}.get(err.status, "bad_request"))
                return _error(err.status, str(err),
                              {"Retry-After": "1"} if err.status == 503 else None)
            except TimeoutError:
                self.metrics.reject("timeout")
                return _error(504, f"the request took longer than {cfg.request_timeout_s} s; "
                                   f"{handler.timeout_advice}")
        finally:
            if not handed:
                self.in_flight -= 1

    def _held(self, answer: Streamed, deadline: float, rid: str, handler: Handler,
              ) -> Response:
        """A streamed answer's response: it holds a slot and its place in flight until it
        has been sent (or stopped at the request's timeout, or cut by the client)."""
        def release() -> None:
            self._slots.release()
            self.active -= 1
            self.in_flight -= 1
            answer.done()

        def timed_out() -> None:
            self.metrics.reject("timeout")
            log.warning(json.dumps({"event": "stream_timeout", "request_id": rid,
                                    "path": handler.path,
                                    "seconds": self.config.request_timeout_s}))

        return HeldStream(answer.body(), answer.media_type, deadline, release, timed_out)

    async def _body(self, request: Request) -> bytes | Response:
        """The request's body, or the response refusing it: 400 for a malformed
        Content-Length, 413 past the body limit (declared, or counted as a chunked body
        arrives: the rest is then read and dropped, up to the limit again and within the body
        timeout, so the client reads the 413 instead of a reset connection), 408 when the
        whole body has not arrived within the body timeout (a stalled client, or a body
        shorter than its Content-Length). 408 and 413 close the connection."""
        limit = self.limits.max_body_bytes
        timeout = self.config.body_timeout_s
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                self.metrics.reject("bad_request")
                return _error(400, "Content-Length is not a number", _CLOSE)
            if int(declared) > limit:
                self.metrics.reject("too_large")
                return _error(413, f"request body of {declared} bytes exceeds the limit of "
                                   f"{limit}", _CLOSE)
        parts = []
        size = 0
        over = False
        try:
            async with asyncio.timeout(timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        over = True
                        if size > 2 * limit:
                            break  # dropped enough: answer now, the connection closes
                        continue
                    parts.append(chunk)
        except TimeoutError:
            if not over:
                self.metrics.reject("body_timeout")
                expected = f" of {declared}" if declared is not None else ""
                return _error(408, f"the request body did not arrive within {timeout} s "
                                   f"({size}{expected} bytes received); send it at once",
                              _CLOSE)
        if over:
            self.metrics.reject("too_large")
            return _error(413, f"request body exceeds the limit of {limit} bytes", _CLOSE)
        request.scope["tessera.bytes_in"] = size
        return b"".join(parts)


#: Headers of an answer after which the connection closes (its body was not read whole).
_CLOSE = {"Connection": "close"}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message, "status": status}, status_code=status,
                        headers=headers)


def create_app(store: Store, *, token: str | None, config: ServerConfig | None = None,
               ) -> Starlette:
    """The pushdown server for ``store`` (its root is what requests may read).

    ``token=None`` turns authentication off; only :func:`~tessera.server.serve.serve`'s
    explicit ``insecure_no_auth`` should do that, and then only on loopback.
    """
    state = PushdownApp(store, config or ServerConfig.from_env(), token)

    def route(path: str, fn: Callable[[Request, str], Awaitable[Response]], method: str,
              auth: bool = True) -> Route:
        async def endpoint(request: Request) -> Response:
            return await state.handle(request, path, auth, fn)

        return Route(path, endpoint, methods=[method])

    async def not_found(request: Request, exc: Any) -> Response:
        return _error(exc.status_code if hasattr(exc, "status_code") else 404,
                      f"no route {request.method} {request.url.path}")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        # uvicorn has stopped accepting and let requests in flight finish
        log.info(json.dumps({"event": "stop", "served": sum(state.metrics.requests.values()),
                             "pid": os.getpid()}))

    def handler_route(h: Handler) -> Route:
        run = h.build(state)

        async def work(request: Request, rid: str) -> Response:
            return await state.admit(request, rid, h, run)

        return route(h.path, work, "POST")

    app = Starlette(lifespan=lifespan, routes=[route("/v1/health", state.health, "GET", auth=False),
                            route("/v1/health/live", state.live, "GET", auth=False),
                            route("/v1/health/ready", state.ready, "GET", auth=False),
                            route("/v1/info", state.info, "GET"),
                            route("/metrics", state.metrics_text, "GET"),
                            *(handler_route(h) for h in state.handlers.values())],
                    exception_handlers={404: not_found, 405: not_found})
    app.state.pushdown = state
    return app
