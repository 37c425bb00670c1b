"""Incremental HTTP/1.1 message framing for the emulated link.

The link proxy forwards raw TCP bytes; this module tells it where each request or response
starts and ends, and which bytes are head (start line + headers) and which are body, without
buffering bodies (a chunked body's coding bytes are told apart from its payload). It
understands Content-Length, chunked transfer coding, bodiless responses
(HEAD, 1xx, 204, 304) and bodies delimited by connection close. Anything it cannot parse turns
it into a pass-through that reports plain body bytes.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Literal

MAX_HEAD_BYTES = 256 * 1024

Kind = Literal["head", "body", "framing"]


@dataclasses.dataclass
class Segment:
    """A run of bytes of one message.

    Attributes:
        kind: ``head``, ``body`` (the message's payload) or ``framing`` (the chunked transfer
            coding's size lines, the CRLF after each chunk and the trailer: HTTP's own bytes
            inside the body, not payload).
        data: the bytes.
        starts: True if this segment begins a new message.
        ends: True if the message ends with this segment.
        method: request method (requests), or the method answered (responses).
        status: response status code (response heads only).
    """

    kind: Kind
    data: bytes
    starts: bool = False
    ends: bool = False
    method: str = ""
    status: int = 0


class MessageFramer:
    """Splits one direction of an HTTP/1.1 connection into message segments.

    For responses, pass the queue of request methods of the same connection (the request
    framer fills it) so that responses to HEAD are known to have no body.
    """

    def __init__(self, role: Literal["request", "response"],
                 methods: deque[str] | None = None) -> None:
        self.role = role
        self.methods = methods if methods is not None else deque()
        self._buf = bytearray()
        self._state = "head"  # head | length | chunk_size | chunk_data | chunk_crlf | trailer
        self._remaining = 0  # close | passthrough
        self._method = ""
        self.broken = False

    def feed(self, data: bytes) -> list[Segment]:
        """Segments for ``data``, in order; together they cover ``data`` exactly."""
        out: list[Segment] = []
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            if self._state == "passthrough" or self._state == "close":
                out.append(Segment("body", bytes(view[pos:]), method=self._method))
                break
            if self._state == "head":
                pos = self._feed_head(view, pos, out)
            elif self._state == "length":
                n = min(self._remaining, len(view) - pos)
                self._remaining -= n
                done = self._remaining == 0
                out.append(Segment("body", bytes(view[pos:pos + n]), ends=done,
                                   method=self._method))
                pos += n
                if done:
                    self._state = "head"
            else:
                pos = self._feed_chunked(view, pos, out)
        return out

    # -- head ------------------------------------------------------------------------------
    def _feed_head(self, view: memoryview, pos: int, out: list[Segment]) -> int:
        if not self._buf:  # skip stray CRLFs between messages
            while pos < len(view) and view[pos] in (0x0D, 0x0A):
                out.append(Segment("body", bytes(view[pos:pos + 1]), method=self._method))
                pos += 1
            if pos >= len(view):
                return pos
        start_len = len(self._buf)
        self._buf += view[pos:]
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD_BYTES:
                self._to_passthrough(out)
            return len(view)
        head = bytes(self._buf[:end + 4])
        used = end + 4 - start_len
        self._buf.clear()
        seg = self._parse_head(head)
        if seg is None:
            out.append(Segment("body", head))
            self._to_passthrough(out)
            return pos + used
        out.append(seg)
        return pos + used

    def _to_passthrough(self, out: list[Segment]) -> None:
        if self._buf:
            out.append(Segment("body", bytes(self._buf)))
            self._buf.clear()
        self._state = "passthrough"
        self.broken = True

    def _parse_head(self, head: bytes) -> Segment | None:
        try:
            text = head.decode("latin-1")
            lines = text.split("\r\n")
            first = lines[0].split(" ")
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if not line:
                    continue
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        except (UnicodeDecodeError, ValueError):
            return None
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length_text = headers.get("content-length")
        try:
            length = int(length_text) if length_text is not None else None
        except ValueError:
            return None
        if self.role == "request":
            if len(first) < 3 or not first[2].startswith("HTTP/"):
                return None
            method = first[0].upper()
            self._method = method
            self.methods.append(method)
            status = 0
            bodiless = not chunked and not length
        else:
            if len(first) < 2 or not first[0].startswith("HTTP/") or not first[1].isdigit():
                return None
            status = int(first[1])
            interim = 100 <= status < 200
            if interim:
                method = self.methods[0] if self.methods else ""
            else:
                method = self.methods.popleft() if self.methods else ""
            self._method = method
            bodiless = interim or status in (204, 304) or method == "HEAD"
            if not bodiless and not chunked and length is None:
                self._state = "close"
                return Segment("head", head, starts=True, method=method, status=status)
            bodiless = bodiless or (not chunked and length == 0)
        if bodiless:
            self._state = "head"
            return Segment("head", head, starts=True, ends=True, method=method, status=status)
        if chunked:
            self._state = "chunk_size"
        else:
            assert length is not None
            self._state, self._remaining = "length", length
        return Segment("head", head, starts=True, method=method, status=status)

    # -- chunked bodies --------------------------------------------------------------------
    def _feed_chunked(self, view: memoryview, pos: int, out: list[Segment]) -> int:
        if self._state in ("chunk_size", "trailer"):
            nl = bytes(view[pos:]).find(b"\n")
            if nl < 0:
                self._buf += view[pos:]
                if len(self._buf) > MAX_HEAD_BYTES:
                    self._to_passthrough(out)
                out.append(Segment("framing", bytes(view[pos:]), method=self._method))
                return len(view)
            line = bytes(self._buf) + bytes(view[pos:pos + nl + 1])
            self._buf.clear()
            end_msg = False
            if self._state == "chunk_size":
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    out.append(Segment("body", bytes(view[pos:pos + nl + 1])))
                    self._to_passthrough(out)
                    return pos + nl + 1
                if size == 0:
                    self._state = "trailer"
                else:
                    self._state, self._remaining = "chunk_data", size
            elif line.strip() == b"":
                end_msg = True
                self._state = "head"
            out.append(Segment("framing", bytes(view[pos:pos + nl + 1]), ends=end_msg,
                               method=self._method))
            return pos + nl + 1
        if self._state == "chunk_data":
            n = min(self._remaining, len(view) - pos)
            self._remaining -= n
            if self._remaining == 0:
                self._state, self._remaining = "chunk_crlf", 2
            out.append(Segment("body", bytes(view[pos:pos + n]), method=self._method))
            return pos + n
        # chunk_crlf
        n = min(self._remaining, len(view) - pos)
        self._remaining -= n
        if self._remaining == 0:
            self._state = "chunk_size"
        out.append(Segment("framing", bytes(view[pos:pos + n]), method=self._method))
        return pos + n
