"""Running the pushdown server: token handling, the loopback rule for unauthenticated
servers, JSON logs, and uvicorn with a graceful shutdown (``tessera serve`` calls
:func:`serve`)."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

from tessera._sync import run_sync
from tessera.config import ServerConfig
from tessera.errors import ConfigError, TesseraError
from tessera.server.health import probe_root
from tessera.storage.blocking import open_store

MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("localhost",)


def read_token_file(path: str | Path) -> str:
    """The bearer token in ``path`` (surrounding whitespace dropped); it must hold at least
    16 characters and no whitespace inside."""
    p = Path(path)
    try:
        token = p.read_text().strip()
    except OSError as err:
        raise ConfigError(f"cannot read token file {p}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"token file {p} is not text") from None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ConfigError(f"token file {p} must hold one token of at least {MIN_TOKEN_CHARS} "
                          "characters without whitespace (e.g. `openssl rand -hex 32`)")
    return token


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


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger and the message (itself JSON for the
    server's request logs)."""

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        try:
            body: Any = json.loads(msg)
        except ValueError:
            body = {"message": msg}
        if not isinstance(body, dict):
            body = {"message": msg}
        return json.dumps({"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
                           "level": record.levelname.lower(), "logger": record.name, **body})


def serve(root_url: str, *, host: str = "127.0.0.1", port: int = 8700,
          token_file: str | Path | None = None, insecure_no_auth: bool = False,
          config: ServerConfig | None = None, storage_options: dict[str, Any] | None = None,
          log_level: str = "info") -> None:
    """Serve pushdown reads of the store at ``root_url`` until SIGINT or SIGTERM (requests
    in flight get up to 10 s to finish).

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
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger("tessera.server")
    logger.handlers[:] = [handler]
    logger.setLevel(log_level.upper())
    logger.propagate = False
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
    app = create_app(store, token=token, config=config)
    app.state.pushdown.readiness.passed()
    logger.info(json.dumps({"event": "start", "root": str(store.url), "host": host,
                            "port": port, "auth": token is not None, "pid": os.getpid()}))
    # On SIGINT/SIGTERM uvicorn finishes the requests in flight, runs the app's shutdown
    # (which logs "stop") and then re-raises the signal, so the exit status names it.
    # Connections are bounded in number (in total and per client address) and in the time
    # they may take to send a request's headers (tessera.server.connections).
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=10, lifespan="on",
                http=guarded_protocol(ConnectionGuard.of(config)))
