"""Child-process entry point of :class:`tessera.testing.S3TestServer` (not a public API).

Runs moto's S3 app on loopback with changes that matter for measuring, none for results:

* **ranged GET reads only its range.** Stock moto copies the whole object out of its spooled
  buffer (and runs a regex over it) for every GET, so a 1 KiB range costs ~70 ms from a 256 MiB
  object. Here a single-range GET reads just the requested bytes.
* **keep-alive, served by uvicorn.** moto ships on werkzeug's development server, which sends
  ``Connection: close`` on every response and then waits up to 10 ms for stray request bytes:
  every request paid a new TCP connection. uvicorn keeps HTTP/1.1 connections open, as real
  object stores do; moto's WSGI app runs behind uvicorn's WSGI bridge in a thread pool.
* **TCP_NODELAY** on accepted sockets, so headers and body written separately do not wait for
  Nagle's algorithm and a delayed ACK (~40 ms per response otherwise).
* **plain GETs skip moto's request dispatch.** A GET of an object (whole, or one byte range),
  with no query string, no conditions and no CORS, is answered straight from moto's own key
  (the headers moto sends, the same bytes). Through moto's full dispatch such a request costs
  ~2 ms of Python under the GIL, so eight concurrent range GETs were served one after another
  for ~16 ms before the last first byte; a real object store serves them in parallel.
  Everything else (writes, lists, HEAD, conditional or versioned GETs, and every error such as
  a missing key or an unsatisfiable range) still goes through moto.

And one change that matters for results, in both modes: **conditional puts are atomic**, as
S3's are. moto checks ``If-None-Match: *`` (and ``If-Match``) by looking the key up and then
writes it, so two create-only puts of one key racing in its thread pool could both succeed,
the second silently replacing the first: writers committing at once (a Delta log entry
each) lost commits. Here a conditional put holds one lock from its check to its write.

``python benchmarks/link_check.py`` measures these beside stock moto on this machine.

``--stock`` runs moto exactly as shipped (werkzeug, none of the above).

Prints ``TESSERA_S3_READY <port>`` on stdout once the buckets exist, and exits on SIGTERM,
SIGINT or when its stdin closes (the parent died).
"""

# mypy: disable-error-code="attr-defined,method-assign,assignment"
# (this module patches moto's classes at run time, which is what those codes flag)
from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

from tessera.testing._process import on_stdin_close

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


_FALLBACK_HEADERS = frozenset({
    b"if-match", b"if-none-match", b"if-modified-since", b"if-unmodified-since", b"origin",
    b"x-amz-checksum-mode", b"x-amz-server-side-encryption-customer-algorithm"})
_PLAIN_PATH = re.compile(rb"^/([a-z0-9][a-z0-9.-]{1,62})/([A-Za-z0-9._~/-]+)$")
_RANGE = re.compile(rb"bytes=(\d+)-(\d*)")
_INLINE_BODY = 1 << 20  # bytes read on the event loop itself


def _parse_range(header: bytes, size: int) -> tuple[int, int] | None:
    """``(start, stop)`` of a single satisfiable ``bytes=`` range, else ``None`` (moto then
    answers: multi-range, suffix, unsatisfiable and malformed ranges keep its behaviour)."""
    m = _RANGE.fullmatch(header.strip())
    if m is None:
        return None
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else size - 1
    if start >= size or end < start:
        return None
    return start, min(end, size - 1) + 1


def _plain_get(scope: dict[str, Any],
               ) -> tuple[int, list[tuple[bytes, bytes]], Callable[[], bytes], int] | None:
    """The answer to a plain object GET straight from moto's key (status, headers, a reader
    of the body and its length), or ``None`` when moto must answer (anything else, and
    every error)."""
    if scope.get("method") != "GET" or scope.get("query_string"):
        return None
    headers = dict(scope.get("headers") or [])
    if not _FALLBACK_HEADERS.isdisjoint(headers):
        return None
    m = _PLAIN_PATH.match(scope.get("raw_path") or b"")
    if m is None:  # escapes, virtual-hosted buckets, bucket-level requests: moto decides
        return None
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import FakeKey, s3_backends

    try:
        key = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(m.group(1).decode(),
                                                                 m.group(2).decode())
    except Exception:  # no such bucket etc.: moto builds the error
        return None
    if not isinstance(key, FakeKey) or key.encryption is not None \
            or key.storage_class not in ("STANDARD", None):
        return None
    out = key.response_dict  # the headers moto's get_object sends, in the same order
    if key.version_id != "null":
        out["x-amz-version-id"] = key.version_id
    out.update(key.metadata)
    out["Accept-Ranges"] = "bytes"
    size = int(key.contentsize)
    status = 200
    start, stop = 0, size
    if b"range" in headers:
        span = _parse_range(headers[b"range"], size)
        if span is None:
            return None
        start, stop = span
        status = 206
        out["content-range"] = f"bytes {start}-{stop - 1}/{size}"
    def body() -> bytes:
        with key.lock:
            buf = key._value_buffer
            buf.seek(start)
            return bytes(buf.read(stop - start))

    out["content-length"] = str(stop - start)
    if not any(k.lower() == "content-type" for k in out):
        out["Content-Type"] = "binary/octet-stream"
    out["x-amzn-requestid"] = uuid.uuid4().hex  # as moto's server adds (and flask-cors, below)
    out["access-control-allow-origin"] = "*"
    out["x-tessera-test-server"] = "fast-get"  # says which path answered (tests check it)
    return (status, [(k.encode("latin-1"), str(v).encode("latin-1")) for k, v in out.items()],
            body, stop - start)


class _S3App:
    """ASGI front: plain object GETs answered from moto's keys, everything else by moto's WSGI
    app in a thread pool (uvicorn's WSGI bridge)."""

    def __init__(self, wsgi_app: Any) -> None:
        import warnings

        from uvicorn.middleware.wsgi import WSGIMiddleware

        def whole_body(environ: dict[str, Any], start_response: Any) -> Any:
            # uvicorn's bridge hands over the whole request body; saying so lets werkzeug read
            # bodies sent without Content-Length (chunked uploads, e.g. TileDB's AWS SDK),
            # which it would otherwise take as empty.
            environ["wsgi.input_terminated"] = True
            return wsgi_app(environ, start_response)

        with warnings.catch_warnings():  # uvicorn suggests a2wsgi; its own bridge suffices
            warnings.simplefilter("ignore", DeprecationWarning)
            self.moto = WSGIMiddleware(whole_body, workers=32)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            answer = _plain_get(scope)
            if answer is not None:
                status, headers, read, size = answer
                # Large bodies are read off the event loop, so other connections go on.
                data = await asyncio.to_thread(read) if size > _INLINE_BODY else read()
                await send({"type": "http.response.start", "status": status,
                            "headers": headers})
                await send({"type": "http.response.body", "body": data})
                return
        await self.moto(scope, receive, send)


class _Serving:
    """A started server: ``stop()`` ends it."""

    def __init__(self, port: int, thread: threading.Thread, stop: Any) -> None:
        self.port, self._thread, self._stop = port, thread, stop

    def stop(self) -> None:
        self._stop()
        self._thread.join(timeout=10)


def _serve_stock(host: str, port: int, app: Any) -> _Serving:
    """moto as shipped: werkzeug's threaded server (a connection per request)."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Handler(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:  # quiet
            pass

    server = make_server(host, port, app, threaded=True, request_handler=Handler)
    thread = threading.Thread(target=server.serve_forever, name="moto", daemon=True)
    thread.start()
    return _Serving(server.server_address[1], thread, server.shutdown)


def _serve_fast(host: str, port: int, app: Any) -> _Serving:
    """uvicorn (HTTP/1.1 keep-alive, TCP_NODELAY as asyncio sets it) in front of
    :class:`_S3App`."""
    try:
        import uvicorn
    except ImportError as err:  # pragma: no cover - the dev extra installs it
        raise SystemExit("the S3 test server needs uvicorn: pip install 'tessera[dev]' "
                         "(or start it with stock=True)") from err

    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # accepted sockets inherit this one's proto. Without it, headers and body written
    # separately wait ~40 ms for a delayed ACK (Nagle's algorithm).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Idle connections stay open longer than clients keep them pooled (reqwest: 90 s), so a
    # client never reuses one the server is closing.
    config = uvicorn.Config(_S3App(app), log_level="error", access_log=False, lifespan="off",
                            timeout_keep_alive=300, http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])),
                              name="moto", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start serving moto")
        time.sleep(0.01)

    def stop() -> None:
        server.should_exit = True

    return _Serving(sock.getsockname()[1], thread, stop)


def _install_atomic_conditional_puts() -> None:
    """Make a PUT with ``If-None-Match`` or ``If-Match`` check and write under one lock."""
    from moto.s3.responses import S3Response

    lock = threading.Lock()
    plain = S3Response.put_object

    def put_object(self: Any) -> Any:
        if self.headers.get("If-None-Match") or self.headers.get("If-Match"):
            with lock:
                return plain(self)
        return plain(self)

    S3Response.put_object = put_object


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", action="append", default=[])
    parser.add_argument("--stock", action="store_true", help="no fast ranges, no keep-alive")
    args = parser.parse_args(argv)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    _install_atomic_conditional_puts()
    if not args.stock:
        _install_fast_ranges()
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    serving = (_serve_stock if args.stock else _serve_fast)(args.host, args.port, app)
    port = serving.port

    for bucket in args.bucket:
        req = urllib.request.Request(f"http://{args.host}:{port}/{bucket}", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()

    stop = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    on_stdin_close(stop.set)
    print(f"TESSERA_S3_READY {port}", flush=True)
    stop.wait()
    serving.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
