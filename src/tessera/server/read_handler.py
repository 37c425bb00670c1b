"""``POST /v1/read``: a batch of tile and cell reads (:mod:`tessera.pushdown.read_items`), read,
verified, decoded and sliced beside the store by
:class:`~tessera.server.service.ReadService`. Admission, limits and timeouts are the app's
(:mod:`tessera.server.handlers`); this module is only the read itself."""

from __future__ import annotations

import json
import logging

from starlette.responses import Response

from tessera.pushdown.framing import ItemError, encode_response
from tessera.pushdown.read_items import parse_read_request
from tessera.server.framed import framed_response
from tessera.server.handlers import Handler, HandlerFn, ServerContext

log = logging.getLogger("tessera.server")


def build(ctx: ServerContext) -> HandlerFn:
    """The read coroutine of one server."""

    async def read(body: bytes, request_id: str) -> Response:
        items = parse_read_request(body, ctx.limits)  # ProtocolError: 400, 403 or 413
        results, server_s = await ctx.service.read(items)
        failed = [r for r in results if isinstance(r, ItemError)]
        ctx.metrics.served(len(items), [r.status for r in failed])
        if failed:  # the client fetches these tiles itself: an operator must see it
            log.warning(json.dumps({"event": "item_errors", "request_id": request_id,
                                    "count": len(failed), "items": len(items),
                                    "errors": [r.error for r in failed][:5]}))
        return framed_response(encode_response(results, server_s))

    return read


HANDLER = Handler("read", "/v1/read", build, timeout_advice="send fewer tiles per request")
