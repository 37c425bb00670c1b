"""A pushdown server in its own process for tests and benchmarks: ``tessera serve`` on a free
loopback port with a fresh token, its JSON logs kept in a file.

    with PushdownTestServer("s3://tessera-test", storage_options=s3.storage_options()) as srv:
        arr = tessera.open_array(uri, storage_options=..., pushdown=srv.client())
"""

from __future__ import annotations

import atexit
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tessera.errors import TesseraError
from tessera.pushdown.client import PushdownClient
from tessera.testing._process import stop_process


class PushdownTestServerError(TesseraError, RuntimeError):
    """The pushdown test server did not start."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class PushdownTestServer:
    """``tessera serve ROOT`` as a child process on ``127.0.0.1:<free port>``.

    Args:
        root_url: what the server serves.
        storage_options: its store options (endpoint, allow_http, keys, ...).
        token: the bearer token (default: a fresh random one); ``None`` with
            ``insecure=True`` runs without one.
        extra_args: more ``tessera serve`` options (``--max-concurrency 2`` ...).
        env: the server process's whole environment (default: this process's), e.g. to
            configure its store only by ``AWS_*`` variables.
    """

    def __init__(self, root_url: str, *, storage_options: dict[str, Any] | None = None,
                 token: str | None = "", insecure: bool = False,
                 extra_args: list[str] | None = None, start_timeout_s: float = 30.0,
                 env: dict[str, str] | None = None) -> None:
        self.root_url = root_url
        self.env = dict(os.environ if env is None else env)
        self.storage_options = dict(storage_options or {})
        self.token = None if insecure else (token or secrets.token_hex(16))
        self.extra_args = list(extra_args or [])
        self.start_timeout_s = start_timeout_s
        self.host = "127.0.0.1"
        self.port = 0
        self._dir = tempfile.TemporaryDirectory(prefix="tessera-serve-")
        self.log_path = Path(self._dir.name) / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def client(self, **kw: Any) -> PushdownClient:
        """A client with this server's token."""
        return PushdownClient(self.url, token=self.token or "", **kw)

    def logs(self) -> str:
        """What the server logged so far."""
        return self.log_path.read_text() if self.log_path.exists() else ""

    def start(self) -> PushdownTestServer:
        """Start the process and wait until ``/v1/health/ready`` answers 200; a server that
        exits first (it could not read its root, say) raises with its log."""
        if self._proc is not None:
            return self
        self.port = free_port(self.host)
        # Through a wrapper that stops the server when its stdin (this process's pipe)
        # closes, so a parent that dies without stop() leaves no server running.
        cmd = [sys.executable, "-m", "tessera.testing._serve_main", "serve", self.root_url,
               "--host", self.host, "--port", str(self.port)]
        if self.token is None:
            cmd.append("--insecure-no-auth")
        else:
            token_file = Path(self._dir.name) / "token"
            token_file.write_text(self.token)
            token_file.chmod(0o600)
            cmd += ["--token-file", str(token_file)]
        for key, value in self.storage_options.items():
            if key == "allow_http":
                if value:
                    cmd.append("--allow-http")
            else:
                cmd += ["--storage-option", f"{key}={value}"]
        cmd += self.extra_args
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log,
                                      env=self.env)
        # An interpreter that exits without stop() (a with block never left) stops it too.
        atexit.register(self.stop)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/v1/health/ready", timeout=5.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise PushdownTestServerError(f"tessera serve did not start on {self.url}; its log:\n"
                                      f"{self.logs()[-4000:]}")

    def stop(self) -> int | None:
        """SIGTERM (graceful), SIGKILL after 15 s; returns the exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        atexit.unregister(self.stop)
        status = stop_process(proc, 15)
        if proc.stdin is not None:
            proc.stdin.close()
        return status

    def __enter__(self) -> PushdownTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._dir.cleanup()
