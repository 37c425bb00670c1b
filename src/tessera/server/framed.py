"""A framed binary answer (:mod:`tessera.pushdown.framing`) as an HTTP response, sent without
copying its arrays: every handler that answers with cells or features returns
:func:`framed_response`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
