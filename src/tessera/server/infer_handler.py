"""``POST /v1/infer``: the frozen layers ``1..s`` of a registered model on samples of an array
below the root (:mod:`tessera.pushdown.infer_items` is the request,
:mod:`tessera.server.infer` the work). Served only when the server has a models folder
(``tessera serve ROOT --models DIR``).

Besides the app's admission (one slot of ``max_concurrency`` like any request), infer requests
have their own limit: ``infer_concurrency`` compute at once, ``infer_queue`` more may wait,
beyond that 503 with ``Retry-After``; so a burst of forward passes never starves tile reads of
all slots. The forward pass runs in a worker thread (torch releases the GIL); the features go
out without a copy (:func:`~tessera.server.framed.framed_response`), or, when the request asks
for a streamed answer, sample by sample as each server batch is computed (the server then
holds one batch's activations and features, not the whole request's).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.responses import Response

from tessera.config import ServerConfig
from tessera.errors import ServerBusyError
from tessera.pushdown.framing import (
    RESPONSE_TYPE,
    encode_record,
    encode_response,
    stream_end,
    stream_prefix,
)
from tessera.pushdown.infer_items import InferHeader, InferRequest, parse_infer_request
from tessera.server.framed import framed_response
from tessera.server.handlers import Handler, HandlerFn, ServerContext, Streamed

if TYPE_CHECKING:
    from tessera.server.infer import Pass


def build(ctx: ServerContext) -> HandlerFn:
    """The infer coroutine of one server; loads and checks its models folder now."""
    from tessera.server.infer import InferService

    service = InferService(ctx.store, ctx.config)
    cfg = ctx.config
    slots = asyncio.Semaphore(cfg.infer_concurrency)
    waiting = 0
    ctx.info_sections["models"] = [m.describe() for m in service.registry.models.values()]
    def limits() -> dict[str, object]:
        return {"max_samples": cfg.max_infer_samples, "concurrency": cfg.infer_concurrency,
                "queue": cfg.infer_queue, "cos_batch": cfg.cos_batch,
                "memory_bytes": cfg.infer_memory_bytes,
                "model_cache_bytes": cfg.model_cache_bytes, "threads": cfg.infer_threads,
                "emulated": bool(cfg.emulate_compute),
                # CPU cores the forward passes share (0: emulated, a time-shared device)
                "cores": 0 if cfg.emulate_compute else len(os.sched_getaffinity(0))}

    ctx.info_sections["infer"] = limits

    def count(n: int, header: InferHeader, cos: int) -> None:
        ctx.metrics.count("infer_samples", "Samples run through frozen layers.", n)
        ctx.metrics.count("model_cache_" + ("hits" if header.model_cache == "hit"
                                            else "misses"),
                          "Infer requests whose model prefix was (not) loaded already.")
        if header.cos_batch_used < cos:
            ctx.metrics.count("cos_batch_reductions", "Server batches halved on an "
                              "allocation failure.")

    async def infer(body: bytes, request_id: str) -> Response | Streamed:
        nonlocal waiting
        t0 = time.perf_counter()
        req = parse_infer_request(body, ctx.limits, cfg.max_infer_samples)
        hosted, cos = service.check(req, ctx.limits.max_output_bytes)
        if slots.locked() and waiting >= cfg.infer_queue:
            raise ServerBusyError(f"the server is busy computing ({cfg.infer_concurrency} infer "
                                  f"requests running, {waiting} waiting); retry shortly")
        waiting += 1
        try:
            await slots.acquire()
        finally:
            waiting -= 1
        queued = time.perf_counter() - t0
        if req.stream:  # read and load here: their errors still get their statuses
            try:
                run = await asyncio.to_thread(service.start, req, hosted, cos)
            except BaseException:
                slots.release()
                raise
            return streamed(req, run, cos, t0, queued)
        try:
            result = await asyncio.to_thread(service.run, req, hosted, cos)
        finally:
            slots.release()
        result.header.phases["queue"] = queued
        count(len(req.samples), result.header, cos)
        server_s = time.perf_counter() - t0
        return framed_response(encode_response([{"features": result.features}], server_s,
                                               result.header.to_json()))

    def streamed(req: InferRequest, run: Pass, cos: int, t0: float,
                 queued: float) -> Streamed:
        """Each sample's features sent as its server batch is computed; the compute slot
        is held until the stream ends."""
        async def body() -> AsyncIterator[bytes | memoryview]:
            for head in stream_prefix():
                yield head
            batches = iter(run)
            index = 0
            while (batch := await asyncio.to_thread(next, batches, None)) is not None:
                for features in batch:
                    for chunk in encode_record(index, {"features": features}):
                        yield chunk
                    index += 1
            header = run.header()
            header.phases["queue"] = queued
            count(len(req.samples), header, cos)
            for end in stream_end(time.perf_counter() - t0, len(req.samples),
                                  header.to_json()):
                yield end

        return Streamed(body, RESPONSE_TYPE, done=slots.release)

    return infer


def _enabled(config: ServerConfig) -> bool:
    return bool(config.models_dir)


HANDLER = Handler("infer", "/v1/infer", build, enabled=_enabled,
                  timeout_advice="send fewer samples per request or split earlier")
