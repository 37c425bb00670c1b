"""What a pushdown server process sets up before it serves: its bearer token (read from a
file) and its JSON-lines logger. ``tessera serve`` and each of its worker processes
(:mod:`tessera.server.workers`) use them."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from tessera.errors import ConfigError

MIN_TOKEN_CHARS = 16


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


def json_logger(log_level: str) -> logging.Logger:
    """The server's logger, writing JSON lines on stderr at ``log_level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger("tessera.server")
    logger.handlers[:] = [handler]
    logger.setLevel(log_level.upper())
    logger.propagate = False
    return logger
