"""``POST /v1/infer``: the frozen layers ``1..s`` of a registered model on samples of an array
below the root (:mod:`tessera.pushdown.infer_items` is the request,
:mod:`tessera.server.infer` the work). Served only when the server has a models folder
(``tessera serve ROOT --models DIR``).

Besides the app's admission (one slot of ``max_concurrency`` like any request), infer requests
have their own limit: ``infer_concurrency`` compute at once, ``infer_queue`` more may wait,
beyond that 503 with ``Retry-After``; so a burst of forward passes never starves tile reads of
all slots. The forward pass runs in a worker thread (torch releases the GIL); the features go
out without a copy (:func:`~tessera.server.framed.framed_response`).
"""

from __future__ import annotations

import asyncio
import os
import time

from starlette.responses import Response

from tessera.config import ServerConfig
from tessera.errors import ServerBusyError
from tessera.pushdown.framing import encode_response
from tessera.pushdown.infer_items import parse_infer_request
from tessera.server.framed import framed_response
from tessera.server.handlers import Handler, HandlerFn, ServerContext


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

    async def infer(body: bytes, request_id: str) -> Response:
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
        try:
            queued = time.perf_counter() - t0
            result = await asyncio.to_thread(service.run, req, hosted, cos)
        finally:
            slots.release()
        result.header.phases["queue"] = queued
        n = len(req.samples)
        ctx.metrics.count("infer_samples", "Samples run through frozen layers.", n)
        ctx.metrics.count("model_cache_" + ("hits" if result.header.model_cache == "hit"
                                            else "misses"),
                          "Infer requests whose model prefix was (not) loaded already.")
        if result.header.cos_batch_used < cos:
            ctx.metrics.count("cos_batch_reductions", "Server batches halved on an "
                              "allocation failure.")
        server_s = time.perf_counter() - t0
        return framed_response(encode_response([{"features": result.features}], server_s,
                                               result.header.to_json()))

    return infer


def _enabled(config: ServerConfig) -> bool:
    return bool(config.models_dir)


HANDLER = Handler("infer", "/v1/infer", build, enabled=_enabled,
                  timeout_advice="send fewer samples per request or split earlier")
