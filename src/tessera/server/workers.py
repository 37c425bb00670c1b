"""Worker processes of ``tessera serve --workers N``: uvicorn starts them with ``spawn`` and
each builds its own app from the spec the parent exported (:data:`WORKER_SPEC`, JSON: the
root, the token file, the storage options, the server settings and the log level), so each
has its own store handle, tile cache, admission queue and connection limits.

:data:`GuardedProtocol` is the connection-guarded HTTP protocol (see
:mod:`tessera.server.connections`) as a module attribute, so that uvicorn's config, pickled
into each worker, names a class the worker can import; its limits come from the same spec.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tessera.config import ServerConfig, environment
from tessera.errors import ConfigError
from tessera.server.connections import ConnectionGuard, guarded_protocol

#: The environment variable holding a worker's spec.
WORKER_SPEC = "TESSERA_SERVE_WORKER_SPEC"


def worker_spec() -> dict[str, Any]:
    """The spec the parent exported (a :class:`~tessera.errors.ConfigError` without one)."""
    text = environment().get(WORKER_SPEC)
    if not text:
        raise ConfigError(f"{WORKER_SPEC} is not set: worker processes are started by "
                          "`tessera serve --workers N`")
    spec: dict[str, Any] = json.loads(text)
    return spec


def _settings(spec: dict[str, Any] | None) -> ServerConfig:
    return ServerConfig(**spec["config"]) if spec is not None else ServerConfig.from_env()


def worker_app() -> Any:
    """One worker's app (uvicorn's factory): its logging, its store (the root probed once),
    its app, ready."""
    from tessera._sync import run_sync
    from tessera.server.app import create_app
    from tessera.server.health import probe_root
    from tessera.server.startup import json_logger, read_token_file
    from tessera.storage.blocking import open_store

    spec = worker_spec()
    logger = json_logger(spec["log_level"])
    store = open_store(spec["root"], **spec["storage_options"])
    run_sync(probe_root(store.aio))
    token = read_token_file(spec["token_file"]) if spec["token_file"] is not None else None
    app = create_app(store, token=token, config=_settings(spec))
    app.state.pushdown.readiness.passed()
    import os

    logger.info(json.dumps({"event": "worker_start", "root": str(store.url),
                            "pid": os.getpid()}))
    return app


def _protocol() -> type[asyncio.Protocol]:
    text = environment().get(WORKER_SPEC)
    cls = guarded_protocol(ConnectionGuard.of(_settings(json.loads(text) if text else None)))
    cls.__module__, cls.__qualname__ = __name__, "GuardedProtocol"
    return cls


#: uvicorn's h11 protocol with the spec's connection limits (per worker process).
GuardedProtocol = _protocol()
