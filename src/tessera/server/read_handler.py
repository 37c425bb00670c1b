"""``POST /v1/read``: a batch of tile and cell reads (:mod:`tessera.pushdown.read_items`), read,
verified, decoded and sliced beside the store by
:class:`~tessera.server.service.ReadService`, answered whole or, when the request asks for it,
streamed: each item's cells sent as soon as they are ready. Admission, limits and timeouts are
the app's (:mod:`tessera.server.handlers`); this module is only the read itself."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator

from starlette.responses import Response

from tessera.pushdown.framing import (
    RESPONSE_TYPE,
    ItemError,
    encode_record,
    encode_response,
    stream_end,
    stream_prefix,
)
from tessera.pushdown.read_items import ReadItem, parse_read_request
from tessera.server.framed import framed_response
from tessera.server.handlers import Handler, HandlerFn, ServerContext, Streamed

log = logging.getLogger("tessera.server")


def build(ctx: ServerContext) -> HandlerFn:
    """The read coroutine of one server."""

    def served(items: int, failed: list[ItemError], request_id: str) -> None:
        ctx.metrics.served(items, [r.status for r in failed])
        if failed:  # the client fetches these tiles itself: an operator must see it
            log.warning(json.dumps({"event": "item_errors", "request_id": request_id,
                                    "count": len(failed), "items": items,
                                    "errors": [r.error for r in failed][:5]}))

    async def read(body: bytes, request_id: str) -> Response | Streamed:
        request = parse_read_request(body, ctx.limits)  # ProtocolError: 400, 403 or 413
        items = request.items
        if request.stream:
            return streamed(items, request_id)
        results, server_s = await ctx.service.read(items)
        served(len(items), [r for r in results if isinstance(r, ItemError)], request_id)
        return framed_response(encode_response(results, server_s))

    def streamed(items: list[ReadItem], request_id: str) -> Streamed:
        """Each item's record sent as soon as it is answered (framing's streamed response);
        the server holds only the answers not yet sent."""
        failed: list[ItemError] = []

        async def body() -> AsyncIterator[bytes | memoryview]:
            t0 = time.perf_counter()
            for head in stream_prefix():
                yield head
            answers = ctx.service.answers(items)
            try:
                async for index, result in answers:
                    if isinstance(result, ItemError):
                        failed.append(result)
                    for chunk in encode_record(index, result):
                        yield chunk
            finally:
                await answers.aclose()  # type: ignore[attr-defined]
            for end in stream_end(time.perf_counter() - t0, len(items)):
                yield end

        return Streamed(body, RESPONSE_TYPE,
                        done=lambda: served(len(items), failed, request_id))

    return read


HANDLER = Handler("read", "/v1/read", build, timeout_advice="send fewer tiles per request")
