"""Child-process entry point of :class:`tessera.testing.S3TestServer` (not a public API).

Runs moto's S3 server on loopback with three changes that matter for measuring, none for
results:

* **ranged GET reads only its range.** Stock moto copies the whole object out of its spooled
  buffer (and runs a regex over it) for every GET, so a 1 KiB range costs ~70 ms from a 256 MiB
  object. Here a single-range GET reads just the requested bytes.
* **keep-alive.** HTTP/1.1 persistent connections instead of one TCP connection per request,
  as real object stores do.
* **TCP_NODELAY** on accepted sockets, so headers and body written separately do not wait for
  Nagle's algorithm (~40 ms per response otherwise).

Prints ``TESSERA_S3_READY <port>`` on stdout once the buckets exist, and exits on SIGTERM,
SIGINT or when its stdin closes (the parent died).
"""

# mypy: disable-error-code="attr-defined,method-assign,assignment"
# (this module patches moto's classes at run time, which is what those codes flag)
from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
import urllib.request
from typing import Any

_RANGE_READ = threading.local()


class _LazyObjectBody:
    """Stands in for a key's bytes: ``len()`` is free and slicing reads only the slice."""

    def __init__(self, key: Any) -> None:
        self._key = key
        self._size = int(key.contentsize)

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __getitem__(self, item: slice) -> bytes:
        start, stop, step = item.indices(self._size)
        if step != 1:
            return self.read_all()[item]
        with self._key.lock:
            buf = self._key._value_buffer
            buf.seek(start)
            return bytes(buf.read(max(0, stop - start)))

    def read_all(self) -> bytes:
        return self[0 : self._size]


def _install_fast_ranges() -> None:
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    value_prop = FakeKey.value

    def value_get(self: Any) -> Any:
        if getattr(_RANGE_READ, "active", False):
            return _LazyObjectBody(self)
        return value_prop.fget(self)

    FakeKey.value = property(value_get, value_prop.fset)

    orig_get_object = S3Response.get_object
    orig_handle_range = S3Response._handle_range_header

    def get_object(self: Any) -> Any:
        rng = self.headers.get("range") or self.headers.get("Range") or ""
        simple = rng.startswith("bytes=") and "," not in rng and not self._get_param("partNumber")
        _RANGE_READ.active = bool(simple)
        try:
            return orig_get_object(self)
        finally:
            _RANGE_READ.active = False

    def handle_range(self: Any, request: Any, headers: Any, content: Any) -> Any:
        status, out_headers, body = orig_handle_range(self, request, headers, content)
        if isinstance(body, _LazyObjectBody):  # moto fell back to a whole-object answer
            body = body.read_all()
        return status, out_headers, body

    S3Response.get_object = get_object
    S3Response._handle_range_header = handle_range


def _make_server(host: str, port: int, keep_alive: bool) -> Any:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Handler(WSGIRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_request(self, *args: Any, **kwargs: Any) -> None:  # quiet
            pass

    app = DomainDispatcherApplication(create_backend_app)
    return make_server(host, port, app, threaded=True, request_handler=Handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", action="append", default=[])
    parser.add_argument("--stock", action="store_true", help="no fast ranges, no keep-alive")
    args = parser.parse_args(argv)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    if not args.stock:
        _install_fast_ranges()
    server = _make_server(args.host, args.port, keep_alive=not args.stock)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="moto", daemon=True)
    thread.start()

    for bucket in args.bucket:
        req = urllib.request.Request(f"http://{args.host}:{port}/{bucket}", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()

    stop = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    def _watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read(1):
                pass
        except (OSError, ValueError):
            pass
        stop.set()

    threading.Thread(target=_watch_stdin, name="stdin-watch", daemon=True).start()
    print(f"TESSERA_S3_READY {port}", flush=True)
    stop.wait()
    server.shutdown()
    thread.join(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
