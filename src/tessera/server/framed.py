"""A framed binary answer (:mod:`tessera.pushdown.framing`) as an HTTP response, sent without
copying its arrays: every handler that answers with cells or features returns
:func:`framed_response`; a streamed answer goes out through :class:`HeldStream`."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from starlette.responses import StreamingResponse

from tessera.pushdown.framing import RESPONSE_TYPE

PIECE_BYTES = 1 << 20


def pieces(chunks: Sequence[bytes | memoryview]) -> Iterator[bytes | memoryview]:
    """The framed answer in pieces of at most :data:`PIECE_BYTES`, views of its arrays (no
    copy): the server sends them one at a time (uvicorn waits for the socket to drain between
    them), so it never holds a second whole copy of an answer's arrays.

    >>> [len(p) for p in pieces([b"head", memoryview(bytes(PIECE_BYTES + 5))])]
    [4, 1048576, 5]
    """
    for chunk in chunks:
        view = memoryview(chunk).cast("B")
        for start in range(0, len(view), PIECE_BYTES):
            yield view[start:start + PIECE_BYTES]


def framed_response(chunks: Sequence[bytes | memoryview]) -> StreamingResponse:
    """The chunks of :func:`~tessera.pushdown.framing.encode_response` as a response with its
    ``Content-Length`` (no chunked transfer encoding: the bytes on the wire are the frame)."""
    size = sum(memoryview(c).nbytes for c in chunks)
    return StreamingResponse(pieces(chunks), media_type=RESPONSE_TYPE,
                             headers={"Content-Length": str(size)})


log = logging.getLogger("tessera.server")


class HeldStream(StreamingResponse):
    """A streamed answer (``body``'s pieces, each cut by :func:`pieces`) that holds what
    admitted it until its last byte: ``release`` is called once the response is over, sent
    whole, stopped at ``deadline`` (the event loop's clock; ``on_timeout`` is called and the
    stream ends where it is) or cut by the client going away."""

    def __init__(self, body: AsyncIterator[bytes | memoryview], media_type: str,
                 deadline: float, release: Callable[[], None],
                 on_timeout: Callable[[], None]) -> None:
        self._source, self._deadline = body, deadline
        self._release, self._on_timeout = release, on_timeout
        super().__init__(self._pieces(), media_type=media_type)

    async def _pieces(self) -> AsyncIterator[bytes | memoryview]:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    async with asyncio.timeout(max(0.0, self._deadline - loop.time())):
                        chunk = await anext(self._source)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    self._on_timeout()
                    return
                for piece in pieces([chunk]):
                    yield piece
        except Exception as err:  # the status is sent: end the stream, the client sees it cut
            log.error(json.dumps({"event": "stream_failed", "error": f"{type(err).__name__}: "
                                                                     f"{err}"}))
        finally:
            await self._source.aclose()  # type: ignore[attr-defined]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()

