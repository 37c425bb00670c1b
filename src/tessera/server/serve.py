"""Running the pushdown server: token handling, the loopback rule for unauthenticated
servers, JSON logs, and uvicorn with a graceful shutdown (``tessera serve`` calls
:func:`serve`)."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import stat
from pathlib import Path
from typing import Any

from tessera._sync import run_sync
from tessera.config import ServerConfig, export_to_children
from tessera.errors import ConfigError, TesseraError
from tessera.server.health import probe_root
from tessera.server.startup import json_logger, read_token_file
from tessera.storage.blocking import open_store

LOOPBACK_NAMES = ("localhost",)


def token_file_warning(path: str | Path) -> str | None:
    """A warning when the token file is readable by others than its owner."""
    mode = Path(path).stat().st_mode
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        return (f"token file {path} is readable by group or others; "
                f"`chmod 600 {path}` keeps the token private")
    return None


def is_loopback(host: str) -> bool:
    """True if ``host`` only accepts connections from this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(root_url: str, *, host: str = "127.0.0.1", port: int = 8700,
          token_file: str | Path | None = None, insecure_no_auth: bool = False,
          config: ServerConfig | None = None, storage_options: dict[str, Any] | None = None,
          log_level: str = "info", workers: int = 1) -> None:
    """Serve pushdown reads of the store at ``root_url`` until SIGINT or SIGTERM (requests
    in flight get up to 10 s to finish).

    ``workers`` > 1 runs that many server processes behind the one port (uvicorn's
    workers, started with ``spawn``; the kernel hands each new connection to one of them):
    each decodes on its own core, with its own tile cache, concurrency and connection
    limits (the limits are per process).

    Raises :class:`~tessera.errors.ConfigError` without a token file unless
    ``insecure_no_auth`` is set, and then for any host but loopback; and, before binding,
    when one listing of the root fails (:func:`~tessera.server.health.probe_root`), with
    the store's reason (``tessera serve`` then exits with status 1).
    """
    import uvicorn

    from tessera.server.app import create_app
    from tessera.server.connections import ConnectionGuard, guarded_protocol

    if token_file is None and not insecure_no_auth:
        raise ConfigError("the pushdown server needs --token-file FILE (a bearer token of at "
                          "least 16 characters); pass --insecure-no-auth to run without one "
                          "on loopback only")
    if token_file is not None and insecure_no_auth:
        raise ConfigError("give either --token-file or --insecure-no-auth, not both")
    if insecure_no_auth and not is_loopback(host):
        raise ConfigError(f"--insecure-no-auth binds only to loopback (127.0.0.1, ::1, "
                          f"localhost), not {host!r}; use --token-file to serve on {host}")
    token = read_token_file(token_file) if token_file is not None else None
    logger = json_logger(log_level)
    if token_file is not None and (warning := token_file_warning(token_file)):
        logger.warning(json.dumps({"event": "warning", "message": warning}))
    store = open_store(root_url, **(storage_options or {}))
    try:  # a root it cannot read would fail every tile: refuse to start instead
        run_sync(probe_root(store.aio))
    except TesseraError as err:
        logger.error(json.dumps({"event": "not_ready", "root": str(store.url),
                                 "reason": str(err)}))
        raise ConfigError(f"tessera serve cannot read its root {store.url}, so it would "
                          f"fail every read; not starting. {err}") from err
    config = config or ServerConfig.from_env()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be a positive number of processes, got {workers!r}")
    logger.info(json.dumps({"event": "start", "root": str(store.url), "host": host,
                            "port": port, "auth": token is not None, "pid": os.getpid(),
                            "workers": workers}))
    if workers > 1:
        from tessera.server.workers import WORKER_SPEC, GuardedProtocol

        # Each worker process builds its own app from this spec (tessera.server.workers).
        export_to_children(WORKER_SPEC, json.dumps({
            "root": root_url, "token_file": None if token_file is None else str(token_file),
            "storage_options": storage_options or {}, "config": dataclasses.asdict(config),
            "log_level": log_level}))
        uvicorn.run("tessera.server.workers:worker_app", factory=True, workers=workers,
                    host=host, port=port, log_level="warning", access_log=False,
                    timeout_graceful_shutdown=10, lifespan="on", http=GuardedProtocol)
        return
    app = create_app(store, token=token, config=config)
    app.state.pushdown.readiness.passed()
    # On SIGINT/SIGTERM uvicorn finishes the requests in flight, runs the app's shutdown
    # (which logs "stop") and then re-raises the signal, so the exit status names it.
    # Connections are bounded in number (in total and per client address) and in the time
    # they may take to send a request's headers (tessera.server.connections).
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=10, lifespan="on",
                http=guarded_protocol(ConnectionGuard.of(config)))
