"""An emulated cloud link: an asyncio TCP proxy that adds delay, caps bandwidth, counts bytes
and HTTP requests, and injects faults, between a client and a server on loopback.

>>> from tessera.testing import EmulatedLink, S3TestServer
>>> with S3TestServer() as s3, EmulatedLink(s3.port, one_way_delay_s=0.010,
...                                          bandwidth=100e6) as link:   # doctest: +SKIP
...     store = tessera.open_store(s3.url(), **s3.storage_options(endpoint=link.endpoint))
...     link.faults.fail_next(2, status=503)      # the next two requests get 503
...     store.get("key")                          # retried, succeeds on the third try
...     link.counters().requests                  # 3

Model, per direction: bytes read from one side are scheduled on a shared pacer (the
bandwidth cap is one FIFO link shared by all connections, each direction separately, as a
full-duplex line), then delivered ``one_way_delay_s`` after their last byte was "sent".
A per-request first-byte latency holds each response on its own connection before it enters
the link (server think time), so it does not block other connections. Everything can be
changed while the link runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import select
import selectors
import socket
import struct
import threading
import time
from collections import deque
from types import TracebackType
from typing import Any

from tessera.testing.http_framing import MessageFramer, Segment

READ_CHUNK = 64 * 1024
QUEUE_DEPTH = 64
_RESET = object()
_EOF = object()


class _Unset:
    """Marks an argument that was not given (``None`` means something)."""


_UNSET = _Unset()

_REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout", 429: "Too Many Requests"}


@dataclasses.dataclass(frozen=True)
class LinkCounters:
    """A snapshot of what crossed the link.

    ``bytes_up``/``bytes_down``: bytes delivered towards the server / towards the client,
    counted as they are handed to the receiving socket (so never behind what the receiver
    holds, whatever the machine's load).
    ``requests``: HTTP requests seen (injected failures included); ``responses``: responses
    delivered (from the server or injected). Head and body bytes are split by the HTTP framer
    (a chunked body's coding bytes count as head: HTTP's framing, not payload);
    ``*_head_bytes + *_body_bytes`` equals the direction's byte total.
    """

    connections: int = 0
    requests: int = 0
    responses: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    request_head_bytes: int = 0
    request_body_bytes: int = 0
    response_head_bytes: int = 0
    response_body_bytes: int = 0
    injected_errors: int = 0
    injected_resets: int = 0
    injected_stalls: int = 0
    status_counts: dict[int, int] = dataclasses.field(default_factory=dict)


class LinkFaults:
    """Fault switches of an :class:`EmulatedLink`, safe to flip from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors: deque[int] = deque()
        self._resets: deque[int] = deque()
        self._stalls: deque[float] = deque()

    def fail_next(self, count: int = 1, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` from the link itself (the server
        never sees them)."""
        with self._lock:
            self._errors.extend([status] * count)

    def reset_next(self, count: int = 1, after_bytes: int = 0) -> None:
        """Reset the connection (TCP RST) of the next ``count`` responses after ``after_bytes``
        bytes of each (head included) reached the client."""
        with self._lock:
            self._resets.extend([after_bytes] * count)

    def stall_next(self, count: int = 1, seconds: float = 30.0) -> None:
        """Hold the next ``count`` responses for ``seconds`` before their first byte."""
        with self._lock:
            self._stalls.extend([seconds] * count)

    def clear(self) -> None:
        """Disarm every pending fault."""
        with self._lock:
            self._errors.clear()
            self._resets.clear()
            self._stalls.clear()

    def _take(self, which: deque[Any]) -> Any:
        with self._lock:
            return which.popleft() if which else None


#: ``select()`` only takes descriptors below FD_SETSIZE (1024 on Linux).
_FD_SETSIZE = 1024

if hasattr(selectors, "EpollSelector"):

    class _PreciseEpollSelector(selectors.EpollSelector):
        """An epoll selector whose waits end on time to the microsecond.

        ``epoll_wait`` counts its timeout in whole milliseconds, rounded up, so every timed
        delivery of an asyncio link on plain epoll ends up to 1 ms late (0.5 ms on average;
        a round trip has two): on this project's machine a 9.3 ms epoll wait returned after
        a median 10.17 ms, while ``select()`` waits ended a median 0.17 ms late. This
        selector waits on the epoll descriptor itself with ``select()``, which takes
        microseconds, then collects the events without waiting. Should the epoll
        descriptor's number not fit ``select()``, it waits as plain epoll does.
        """

        def select(self, timeout: float | None = None,
                   ) -> list[tuple[selectors.SelectorKey, int]]:
            fd = self.fileno()
            if timeout is not None and timeout > 0 and fd < _FD_SETSIZE:
                select.select([fd], [], [], timeout)
                timeout = 0
            return super().select(timeout)


def _new_link_loop() -> asyncio.AbstractEventLoop:
    """The link's event loop: on the precise selector on Linux (elsewhere the default
    one; kqueue, for one, already takes its timeouts in nanoseconds)."""
    if hasattr(selectors, "EpollSelector"):
        return asyncio.SelectorEventLoop(_PreciseEpollSelector())
    return asyncio.new_event_loop()


class _Pacer:
    """One direction's bandwidth: a FIFO line shared by every connection."""

    def __init__(self) -> None:
        self.next_free = 0.0

    def reserve(self, nbytes: int, rate: float | None, now: float) -> float:
        """When the last of ``nbytes`` handed over ``now`` has been transmitted."""
        if not rate:
            return now
        start = max(now, self.next_free)
        self.next_free = start + nbytes / rate
        return self.next_free


class EmulatedLink:
    """A TCP proxy on ``127.0.0.1`` in front of ``target`` that behaves like a cloud link.

    Args:
        target: the server's port on 127.0.0.1, or a ``(host, port)`` pair.
        one_way_delay_s: propagation delay each way (RTT = 2x).
        bandwidth: cap in bytes per second, shared by all connections, per direction;
            ``None`` for no cap.
        first_byte_latency_s: extra time before each response's first byte.
        listen_port: the proxy's port (0 picks a free one).
    """

    def __init__(self, target: int | tuple[str, int], *, one_way_delay_s: float = 0.0,
                 bandwidth: float | None = None, first_byte_latency_s: float = 0.0,
                 listen_port: int = 0) -> None:
        self.target = ("127.0.0.1", target) if isinstance(target, int) else target
        self.one_way_delay_s = one_way_delay_s
        self.bandwidth = bandwidth
        self.first_byte_latency_s = first_byte_latency_s
        self.faults = LinkFaults()
        self.port = listen_port
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._status: dict[int, int] = {}
        self._up = _Pacer()
        self._down = _Pacer()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    # -- configuration and counters --------------------------------------------------------
    def configure(self, *, one_way_delay_s: float | None = None,
                  bandwidth: float | _Unset | None = _UNSET,
                  first_byte_latency_s: float | None = None) -> None:
        """Change delay, bandwidth (``None`` = uncapped) or first-byte latency while running."""
        if one_way_delay_s is not None:
            self.one_way_delay_s = one_way_delay_s
        if not isinstance(bandwidth, _Unset):
            self.bandwidth = bandwidth
        if first_byte_latency_s is not None:
            self.first_byte_latency_s = first_byte_latency_s

    def counters(self) -> LinkCounters:
        """A snapshot of the counters."""
        with self._lock:
            return LinkCounters(**self._counts, status_counts=dict(self._status))

    def reset_counters(self) -> None:
        """Zero every counter."""
        with self._lock:
            self._counts.clear()
            self._status.clear()

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + n

    def _count_status(self, status: int) -> None:
        with self._lock:
            self._status[status] = self._status.get(status, 0) + 1

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` of the proxy."""
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> EmulatedLink:
        """Start the proxy on its own event-loop thread."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = _new_link_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(
                    self._on_client, "127.0.0.1", self.port))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as err:  # pragma: no cover - port in use etc.
                errors.append(err)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name="emulated-link", daemon=True)
        self._thread.start()
        ready.wait()
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        """Close every connection and stop the proxy."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)

    def __enter__(self) -> EmulatedLink:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- one connection --------------------------------------------------------------------
    async def _on_client(self, c_reader: asyncio.StreamReader,
                         c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        self._count("connections")
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(c_writer)
            self._conns.discard(task)
            return
        for w in (c_writer, s_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(self, c_reader, c_writer, s_reader, s_writer)
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass  # the link is shutting down; the connection is already torn down
        finally:
            self._conns.discard(task)


class _Connection:
    """The two pipes of one proxied connection."""

    def __init__(self, link: EmulatedLink, c_reader: asyncio.StreamReader,
                 c_writer: asyncio.StreamWriter, s_reader: asyncio.StreamReader,
                 s_writer: asyncio.StreamWriter) -> None:
        self.link = link
        self.c_reader, self.c_writer = c_reader, c_writer
        self.s_reader, self.s_writer = s_reader, s_writer
        self.methods: deque[str] = deque()
        self.req_framer = MessageFramer("request", self.methods)
        self.resp_framer = MessageFramer("response", self.methods)
        self.up_q: asyncio.Queue[Any] = asyncio.Queue(QUEUE_DEPTH)
        self.down_q: asyncio.Queue[Any] = asyncio.Queue(QUEUE_DEPTH)
        self.swallowing = 0  # status of an injected error while its request is swallowed
        self.reset_budget: int | None = None  # bytes of this response left before a reset

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(self._pump_up()),
            asyncio.create_task(self._pump_down()),
            asyncio.create_task(self._deliver(self.up_q, self.s_writer, "bytes_up")),
            asyncio.create_task(self._deliver(self.down_q, self.c_writer, "bytes_down")),
        ]
        try:
            # Done when both deliveries finished (EOF or reset propagated).
            await asyncio.gather(tasks[2], tasks[3], return_exceptions=True)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            _abort(self.c_writer)
            _abort(self.s_writer)

    # client -> server
    async def _pump_up(self) -> None:
        try:
            while data := await self.c_reader.read(READ_CHUNK):
                for seg in self.req_framer.feed(data):
                    await self._on_request_segment(seg)
        except (ConnectionError, OSError):
            pass
        await self.up_q.put(_EOF)

    async def _on_request_segment(self, seg: Segment) -> None:
        link = self.link
        if seg.starts:
            link._count("requests")
            status = link.faults._take(link.faults._errors)
            if status is not None:
                self.methods.pop()  # the server never answers this request
                self.swallowing = status
        link._count("request_body_bytes" if seg.kind == "body" else "request_head_bytes",
                    len(seg.data))
        if self.swallowing:
            link._count("bytes_up", len(seg.data))  # it did cross the link
            if seg.ends:
                status, self.swallowing = self.swallowing, 0
                await self._inject_error(status)
            return
        when = link._up.reserve(len(seg.data), link.bandwidth, time.monotonic())
        await self.up_q.put((when + link.one_way_delay_s, seg.data))

    async def _inject_error(self, status: int) -> None:
        link = self.link
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InjectedFault</Code>'
                f"<Message>emulated link injected HTTP {status}</Message></Error>").encode()
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
                f"Retry-After: 0\r\n\r\n").encode()
        link._count("injected_errors")
        link._count("responses")
        link._count_status(status)
        link._count("response_head_bytes", len(head))
        link._count("response_body_bytes", len(body))
        now = time.monotonic()
        when = link._down.reserve(len(head) + len(body), link.bandwidth,
                                  now + link.one_way_delay_s)  # request reached the "server"
        await self.down_q.put((when + link.one_way_delay_s, head + body))

    # server -> client
    async def _pump_down(self) -> None:
        try:
            while data := await self.s_reader.read(READ_CHUNK):
                for seg in self.resp_framer.feed(data):
                    if not await self._on_response_segment(seg):
                        return
        except (ConnectionError, OSError):
            pass
        await self.down_q.put(_EOF)

    async def _on_response_segment(self, seg: Segment) -> bool:
        link = self.link
        data = seg.data
        if seg.starts:
            hold = link.first_byte_latency_s
            stall = link.faults._take(link.faults._stalls)
            if stall is not None:
                link._count("injected_stalls")
                hold += stall
            if hold > 0:
                await asyncio.sleep(hold)
            reset_after = link.faults._take(link.faults._resets)
            self.reset_budget = reset_after
            if seg.status >= 200 or seg.status == 0:
                link._count("responses")
                link._count_status(seg.status)
        link._count("response_body_bytes" if seg.kind == "body" else "response_head_bytes",
                    len(data))
        reset_now = False
        if self.reset_budget is not None:
            if len(data) >= self.reset_budget:
                data, reset_now = data[:self.reset_budget], True
            else:
                self.reset_budget -= len(data)
        if data:
            when = link._down.reserve(len(data), link.bandwidth, time.monotonic())
            await self.down_q.put((when + link.one_way_delay_s, data))
        if reset_now:
            link._count("injected_resets")
            await self.down_q.put(_RESET)
            return False
        return True

    async def _deliver(self, queue: asyncio.Queue[Any], writer: asyncio.StreamWriter,
                       counter: str) -> None:
        link = self.link
        while True:
            item = await queue.get()
            if item is _EOF:
                with contextlib.suppress(OSError, RuntimeError):
                    await writer.drain()
                    if writer.can_write_eof():
                        writer.write_eof()
                return
            if item is _RESET:
                _abort(self.c_writer)
                _abort(self.s_writer)
                return
            when, data = item
            delay = when - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            # Counted before the bytes are handed to the receiving socket: the link thread
            # may lose the CPU right after the write, and a client that already holds the
            # bytes must never read a counter that lags behind them.
            link._count(counter, len(data))
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                return


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0), not a graceful FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()

