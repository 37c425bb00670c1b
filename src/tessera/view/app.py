"""The viewer's web app (starlette): the page, its scripts, and a read-only JSON API.

Routes (every one needs the token, as a ``token`` query parameter or the cookie the page
sets when it is opened with it; without it: 403):

- ``GET /``: the page (a single page; what it shows follows the address's ``#`` part).
- ``GET /static/{file}``: its script and style sheet, shipped inside the package.
- ``GET /api/{name}``: a JSON document from the handler registered under ``name`` in
  :data:`HANDLERS` (``about``, ``tree``, ``array``, ``array/view``, ``array/value``, ``table``,
  ``table/tensor``, ``images``, ``images/grid``, ``images/image``, ``images/curve``,
  ``models``); parameters as query parameters. Errors answer ``{"error": message}`` with
  400 (a bad parameter or a path outside the viewed URL), 404 (nothing there), 413 (over
  the read budget) or 500 (anything else; the message, never a traceback).

Only ``GET`` and ``HEAD`` are served: the viewer has no way to write.

>>> import httpx, numpy as np, tessera
>>> from tessera.view import running
>>> _ = tessera.from_numpy("memory://doc-view-app/a", np.arange(4))
>>> with running(Viewer("memory://doc-view-app"), token="t0k3n") as url:
...     base = url.split("?")[0]
...     httpx.get(base + "api/tree").status_code, httpx.get(url.replace("/?", "/api/tree?")).json()
(403, [{'path': 'a', 'kind': 'array', 'size': ..., 'objects': ..., 'modified': ...}])
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
import math
from collections.abc import Callable
from http.cookies import SimpleCookie
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tessera.errors import InvalidArgumentError, MemoryLimitError, TesseraError
from tessera.view import arrays, images, tables
from tessera.view.catalog import catalog
from tessera.view.core import Viewer
from tessera.view.params import Query

_log = logging.getLogger("tessera.view")

#: A handler: the viewer and the request's parameters -> a JSON-ready document.
Handler = Callable[[Viewer, Query], Any]


def cookie_name(token: str) -> str:
    """The cookie that carries ``token`` once the page was opened with it: named after the
    token, so that viewers on other ports of this machine (cookies ignore ports) keep theirs.

    >>> cookie_name("t0k3n")
    'tessera_view_b81c829a'
    """
    return "tessera_view_" + hashlib.sha256(token.encode()).hexdigest()[:8]
#: What the page may load: its own scripts and styles, pictures from data: URLs.
POLICY = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
          "script-src 'self'; connect-src 'self'; frame-ancestors 'none'")


def _tree(viewer: Viewer, q: Query) -> Any:
    with viewer.lock:
        return [e.to_dict() for e in catalog(viewer.store())]


def _h5(viewer: Viewer, q: Query) -> Any:
    from tessera.describe import h5_doc

    path = q.text("path", "") or ""
    return h5_doc(path, viewer.open_kind(path, None, "tessera.h5 file"))


def _models(viewer: Viewer, q: Query) -> Any:
    from tessera.view.models import page

    return page(viewer)


def _about(viewer: Viewer, q: Query) -> Any:
    return {"url": viewer.url, "budget_bytes": viewer.budget_bytes,
            "models": viewer.models is not None}


#: The API's handlers by name (``GET /api/{name}``).
HANDLERS: dict[str, Handler] = {
    "about": _about,
    "tree": _tree,
    "array": arrays.page,
    "array/view": arrays.view,
    "array/value": arrays.value,
    "table": tables.page,
    "table/tensor": tables.tensor,
    "images": images.page,
    "images/grid": images.grid,
    "images/image": images.image,
    "images/curve": images.curve,
    "h5": _h5,
    "models": _models,
}


def _plain(value: Any) -> Any:
    """What ``json`` cannot write by itself (numpy values are lists and numbers already,
    by :func:`finite`): datetimes in ISO-8601, anything else as its text."""
    return value.isoformat() if isinstance(value, dt.datetime) else str(value)


def status_of(exc: Exception) -> int:
    """The HTTP status of an error a handler raised.

    >>> from tessera.errors import InvalidArgumentError, DataNotFoundError
    >>> status_of(InvalidArgumentError("x")), status_of(DataNotFoundError("y"))
    (400, 404)
    """
    if isinstance(exc, MemoryLimitError):
        return 413
    if isinstance(exc, FileNotFoundError | KeyError):
        return 404
    if isinstance(exc, ValueError | IndexError | LookupError | TypeError):
        return 400
    return 500


def finite(doc: Any) -> Any:
    """``doc`` with every number that JSON (or JavaScript) cannot hold exactly as its text:
    NaN, infinities, integers beyond 2^53.

    >>> finite({"fill": float("nan"), "v": [1.5, float("-inf")], "at": 1795866248879781226})
    {'fill': 'nan', 'v': [1.5, '-inf'], 'at': '1795866248879781226'}
    >>> import numpy as np
    >>> finite({"a": np.array([1.0, np.nan]), "b": np.float32(2)})
    {'a': [1.0, 'nan'], 'b': 2.0}
    """
    if getattr(doc, "ndim", None) is not None and callable(getattr(doc, "tolist", None)):
        doc = doc.tolist()  # a numpy array or scalar: lists and Python numbers
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else str(doc)
    if isinstance(doc, int) and not isinstance(doc, bool) and abs(doc) > 1 << 53:
        return str(doc)  # a commit time in ns: JavaScript's numbers would round it
    if isinstance(doc, dict):
        return {k: finite(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [finite(v) for v in doc]
    return doc


def _json(doc: Any, status: int = 200) -> Response:
    return Response(json.dumps(finite(doc), default=_plain, allow_nan=False), status_code=status,
                    media_type="application/json")


class TokenGate:
    """ASGI middleware: only ``GET``/``HEAD`` requests carrying the token pass; the page
    opened with ``?token=`` sets it as a cookie (HttpOnly, SameSite=Strict)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token, self.cookie = app, token.encode(), cookie_name(token)

    def _given(self, scope: Scope) -> tuple[bool, bool]:
        """Whether the request carries the token, and whether in its query."""
        from urllib.parse import parse_qs

        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        for given in query.get("token", []):
            if hmac.compare_digest(given.encode(), self.token):
                return True, True
        for name, value in scope.get("headers", []):
            if name == b"cookie":
                jar: SimpleCookie = SimpleCookie()
                jar.load(value.decode("latin-1"))
                if self.cookie in jar and hmac.compare_digest(jar[self.cookie].value.encode(),
                                                         self.token):
                    return True, False
        return False, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            response: Response = PlainTextResponse(
                "the viewer is read-only: only GET and HEAD are served", status_code=405)
            await response(scope, receive, send)
            return
        ok, in_query = self._given(scope)
        if not ok:
            response = PlainTextResponse(
                "403 forbidden: this viewer needs its token; open the address `tessera view` "
                "printed (it ends in ?token=...)", status_code=403)
            await response(scope, receive, send)
            return
        if not in_query:
            await self.app(scope, receive, send)
            return
        cookie = f"{self.cookie}={self.token.decode()}; Path=/; HttpOnly; SameSite=Strict"

        async def with_cookie(message: Any) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((b"set-cookie", cookie.encode()))
            await send(message)

        await self.app(scope, receive, with_cookie)


def _static(name: str) -> Response:
    folder = resources.files("tessera.view") / "static"
    target = folder / name
    if name not in STATIC or not target.is_file():
        return PlainTextResponse(f"no file {name!r}", status_code=404)
    with resources.as_file(target) as path:
        return FileResponse(path, media_type=STATIC[name])


#: The files the page loads, with their media types.
STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript",
          "app.css": "text/css", "favicon.svg": "image/svg+xml"}


def create_app(viewer: Viewer, *, token: str) -> ASGIApp:
    """The viewer's ASGI app over ``viewer``, guarded by ``token`` (see the module
    docstring), for any ASGI server; :func:`~tessera.view.running` serves it on a thread.

    >>> app = create_app(Viewer("memory://doc-create-app"), token="t0k3n")
    >>> callable(app)
    True
    """
    if len(token) < 4:
        raise InvalidArgumentError("the viewer's token must have at least 4 characters")

    async def index(request: Request) -> Response:
        return _static("index.html")

    async def static(request: Request) -> Response:
        return _static(request.path_params["name"])

    def api(request: Request) -> Response:
        name = request.path_params["name"]
        handler = HANDLERS.get(name)
        if handler is None:
            return _json({"error": f"no API {name!r}: the viewer has "
                                   f"{', '.join(HANDLERS)}"}, 404)
        try:
            with viewer.lock:  # one request at a time: handles are not shared by threads
                return _json(handler(viewer, Query(request.query_params)))
        except Exception as exc:  # shown on the page, never as a traceback
            status = status_of(exc)
            message = str(exc) if isinstance(exc, TesseraError) else \
                f"{type(exc).__name__}: {exc}"
            if status == 500:
                _log.warning("viewer API %s failed", name, exc_info=True)
            return _json({"error": message}, status)

    app = Starlette(routes=[
        Route("/", index),
        Route("/favicon.ico", lambda r: _static("favicon.svg")),
        Route("/static/{name}", static),
        Route("/api/{name:path}", api),
    ])

    async def secured(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with(message: Any) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).extend([
                    (b"content-security-policy", POLICY.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"cache-control", b"no-store"),
                    (b"referrer-policy", b"no-referrer")])
            await send(message)

        await app(scope, receive, send_with)

    return TokenGate(secured, token)
