"""``tessera serve``: the pushdown server beside a store (docs/server.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import (
    AllowHttpOpt,
    EndpointOpt,
    OptionOpt,
    RegionOpt,
    options,
    url_arg,
)

LIMITS = "Limits"
MODELS = "Frozen models"


def serve(
    url: Annotated[str, url_arg("The store (or place in it) whose objects the server may "
                                "read, e.g. `s3://bucket`.")],
    host: Annotated[str, typer.Option(metavar="ADDRESS", help="Address to bind.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port to bind.")] = 8700,
    token_file: Annotated[Path | None, typer.Option(
        metavar="FILE",
        help="File holding the bearer token clients must send (at least 16 characters).",
    )] = None,
    insecure_no_auth: Annotated[bool, typer.Option(
        "--insecure-no-auth", help="Run without a token (loopback only).")] = False,
    max_concurrency: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS,
        help="Read requests served at once (default 8).",
    )] = None,
    queue: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS,
        help="Requests that may wait for a slot before 503 (default 32).")] = None,
    cache_bytes: Annotated[int | None, typer.Option(
        metavar="BYTES", rich_help_panel=LIMITS,
        help="Memory for decoded tiles kept between requests (default 256 MiB).")] = None,
    request_timeout: Annotated[float | None, typer.Option(
        metavar="SECONDS", rich_help_panel=LIMITS,
        help="Seconds one request may take once its body arrived, before 504 (default 30).")]
    = None,
    body_timeout: Annotated[float | None, typer.Option(
        metavar="SECONDS", rich_help_panel=LIMITS,
        help="Seconds a client has to send a request's headers and then its whole body; a "
             "slower one gets 408 and its connection is closed (default 10).")] = None,
    max_connections: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS,
        help="Open connections kept at once; more are answered 503 and closed (default "
             "1024).")] = None,
    max_connections_per_client: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS,
        help="Open connections from one client address (default 128; 0: no limit, e.g. "
             "behind a load balancer).")] = None,
    models: Annotated[Path | None, typer.Option(
        metavar="FOLDER", rich_help_panel=MODELS,
        help="Models folder (models.json + weights, see `tessera model`): serve "
             "POST /v1/infer with them.")] = None,
    infer_concurrency: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=MODELS,
        help="Infer requests computing at once (default 4).")] = None,
    infer_queue: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=MODELS,
        help="Infer requests that may wait for a compute slot before 503 (default 16).")]
    = None,
    infer_threads: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=MODELS,
        help="Torch threads of the server's forward passes (default 1).")] = None,
    infer_memory: Annotated[int | None, typer.Option(
        metavar="BYTES", rich_help_panel=MODELS,
        help="Activation bytes one infer request may use (default 2 GiB).")] = None,
    model_cache_bytes: Annotated[int | None, typer.Option(
        metavar="BYTES", rich_help_panel=MODELS,
        help="Loaded model prefixes kept between requests (default 1 GiB; 0: load per "
             "request).")] = None,
    cos_batch: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=MODELS,
        help="The server's batch inside an infer request (default 16).")] = None,
    max_infer_samples: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=MODELS,
        help="Samples in one infer request (default 512).")] = None,
    workers: Annotated[int, typer.Option(
        metavar="N",
        help="Server processes behind the port (each with its own cache and limits).")] = 1,
    emulate_compute: Annotated[Path | None, typer.Option(
        hidden=True, help="Testing only: sleep the per-layer seconds of this JSON file "
                          "instead of computing.")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Serve pushdown reads (and frozen model layers) beside a store.

    Clients send tile reads; the server reads, verifies, decodes and slices the tiles and
    returns only the selected cells. With `--models`, it also runs the frozen layers of
    registered models on stored samples (POST /v1/infer). Logs are JSON lines on standard
    error; SIGINT or SIGTERM stop it once the requests in flight finish.

    **Examples**

    ```
    tessera serve data --models models --insecure-no-auth --port 8700
    ```
    """
    from tessera.config import ServerConfig
    from tessera.server.serve import serve as run_server

    config = ServerConfig.from_env(
        max_concurrency=max_concurrency, queue=queue, cache_bytes=cache_bytes,
        request_timeout_s=request_timeout, body_timeout_s=body_timeout,
        max_connections=max_connections,
        max_connections_per_client=max_connections_per_client,
        models_dir=str(models) if models else None,
        infer_concurrency=infer_concurrency, infer_queue=infer_queue,
        infer_threads=infer_threads, infer_memory_bytes=infer_memory,
        model_cache_bytes=model_cache_bytes, cos_batch=cos_batch,
        max_infer_samples=max_infer_samples,
        emulate_compute=str(emulate_compute) if emulate_compute else None)
    run_server(url, host=host, port=port, token_file=token_file,
               insecure_no_auth=insecure_no_auth, config=config,
               storage_options=options(endpoint, region, allow_http, option), workers=workers)


