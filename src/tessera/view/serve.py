"""Running the viewer: bind, print the address with its token, serve until stopped.

:func:`running` serves on a thread (for tests, benchmarks and notebooks) and yields the
address; :func:`serve` serves in the foreground (``tessera view``).
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tessera.errors import InvalidArgumentError
from tessera.view.app import create_app
from tessera.view.core import Viewer

#: Addresses that reach only this machine.
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidArgumentError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                                   "pick another --port (0: any free port)") from None
    sock.listen(64)
    return sock


def address(sock: socket.socket, token: str) -> str:
    """The address to open: ``http://host:port/?token=...``."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def _server(viewer: Viewer, token: str) -> Any:
    import uvicorn

    config = uvicorn.Config(create_app(viewer, token=token), log_level="warning",
                            access_log=False, lifespan="off")
    return uvicorn.Server(config)


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a host other than loopback unless ``allow_remote``."""
    if host not in LOOPBACK and not allow_remote:
        raise InvalidArgumentError(f"the viewer binds to this machine only (127.0.0.1); "
                                   f"--host {host} would show the data to the network: pass "
                                   "--allow-remote as well if that is meant")


@contextlib.contextmanager
def running(viewer: Viewer, *, host: str = "127.0.0.1", port: int = 0,
            token: str | None = None, allow_remote: bool = False) -> Iterator[str]:
    """Serve ``viewer`` on a thread; yields its address (with the token) until the block
    ends. A ``host`` beyond loopback needs ``allow_remote``.

    >>> import httpx, numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-running/a", np.arange(3))
    >>> with running(Viewer("memory://doc-running")) as url:
    ...     httpx.get(url).status_code
    200
    """
    check_host(host, allow_remote)
    token = token or secrets.token_urlsafe(24)
    sock = _bind(host, port)
    server = _server(viewer, token)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="tessera-view")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield address(sock, token)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def serve(viewer: Viewer, *, host: str = "127.0.0.1", port: int = 0,
          token: str | None = None, on_ready: Callable[[str], None] | None = None,
          allow_remote: bool = False) -> None:
    """Serve ``viewer`` until interrupted (``tessera view``); ``on_ready`` gets the address
    once listening. A ``host`` beyond loopback needs ``allow_remote``:

    >>> serve(Viewer("memory://doc-serve-view"), host="0.0.0.0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.InvalidArgumentError: the viewer binds to this machine only ...
    """
    check_host(host, allow_remote)
    token = token or secrets.token_urlsafe(24)
    sock = _bind(host, port)
    if on_ready is not None:
        on_ready(address(sock, token))
    try:
        _server(viewer, token).run(sockets=[sock])
    finally:
        sock.close()
