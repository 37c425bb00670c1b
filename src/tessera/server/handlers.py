"""The pushdown server's handlers: its ``POST`` routes, in one registry.

A handler is a name, a path and a factory: given the server's state
(:class:`ServerContext`), the factory returns the coroutine that turns one admitted request
body into a response. Everything around it is written once, in
:class:`~tessera.server.app.PushdownApp`, for every handler alike: authentication, request
ids, the body limit, admission (slots shared by all handlers, a bounded queue, 503 beyond),
the request timeout (504), rejections of malformed requests (a :class:`~tessera.errors
.ProtocolError` raised by the handler becomes its status: 400, 403 or 413), metrics by path
(and a latency histogram ``tessera_<name>_seconds`` per handler) and JSON logs.
``GET /v1/info`` lists the handlers from here.

The registry is lazy, as fsspec's is: a name maps to ``"module:attribute"``, imported when a
server is built, so a handler's dependencies load only in servers that use them. Adding a
handler is one new module and one line in :data:`KNOWN_HANDLERS` (or a call to
:func:`register_handler` from a plug-in):

>>> [h.path for h in (handler(n) for n in handler_names())]
['/v1/read', '/v1/infer']
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from tessera.errors import ConfigError

if TYPE_CHECKING:
    from starlette.responses import Response

    from tessera.config import ServerConfig
    from tessera.pushdown.framing import Limits
    from tessera.server.cache import TileCache
    from tessera.server.metrics import ServerMetrics
    from tessera.server.service import ReadService
    from tessera.storage.blocking import Store


class ServerContext(Protocol):
    """What a handler's factory may use of the server it runs in."""

    store: Store
    config: ServerConfig
    limits: Limits
    cache: TileCache
    metrics: ServerMetrics
    service: ReadService
    #: What handlers add to ``GET /v1/info`` (the infer handler: its models), by name; a
    #: callable value is called at each ``/v1/info`` (for what may change, e.g. cores).
    info_sections: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Streamed:
    """An answer sent while it is made: a handler returns it instead of a response once the
    request is checked (a malformed one still gets its 4xx). The app sends ``body()``'s
    pieces as they come, holding the request's slot and its timeout until the last one; at
    the timeout the stream stops where it is (the framing tells the client what it did not
    get). ``done`` is called once the stream ends, however it ends."""

    body: Callable[[], AsyncIterator[bytes | memoryview]]
    media_type: str
    done: Callable[[], None] = lambda: None


#: One admitted request: ``(body, request id) -> response`` (or a :class:`Streamed` answer).
HandlerFn = Callable[[bytes, str], Awaitable["Response | Streamed"]]


@dataclasses.dataclass(frozen=True)
class Handler:
    """One ``POST`` route of the server.

    Attributes:
        name: short name (``read``); its latency histogram is ``tessera_<name>_seconds``.
        path: the route (``/v1/read``).
        build: makes the request coroutine for one server's state.
        timeout_advice: what the 504 answer advises (e.g. "send fewer tiles per request").
        enabled: whether a server with this configuration serves the handler (the infer
            handler only when a models folder is given).
    """

    name: str
    path: str
    build: Callable[[ServerContext], HandlerFn]
    timeout_advice: str = "send less per request"
    enabled: Callable[[ServerConfig], bool] = lambda config: True


#: The handlers every server has: name -> ``"module:attribute"`` of its :class:`Handler`.
KNOWN_HANDLERS: dict[str, str] = {
    "read": "tessera.server.read_handler:HANDLER",
    "infer": "tessera.server.infer_handler:HANDLER",
}


def register_handler(name: str, target: str) -> None:
    """Add a handler (``target``: ``"module:attribute"`` of a :class:`Handler`) for servers
    built from now on."""
    if name in KNOWN_HANDLERS:
        raise ConfigError(f"a server handler named {name!r} is registered already")
    KNOWN_HANDLERS[name] = target


def handler_names() -> tuple[str, ...]:
    """The registered handlers' names, in registration order."""
    return tuple(KNOWN_HANDLERS)


def handler(name: str) -> Handler:
    """The handler registered as ``name``, imported now."""
    target = KNOWN_HANDLERS.get(name)
    if target is None:
        raise ConfigError(f"no server handler {name!r}; registered: "
                          f"{', '.join(KNOWN_HANDLERS)}")
    module, _, attr = target.partition(":")
    found = getattr(importlib.import_module(module), attr, None)
    if not isinstance(found, Handler) or found.name != name:
        raise ConfigError(f"server handler {name!r}: {target} is not a Handler named {name!r}")
    return found
