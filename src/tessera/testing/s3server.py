"""An S3-protocol server on a free loopback port, in its own process.

>>> from tessera.testing import S3TestServer
>>> with S3TestServer() as s3:                       # doctest: +SKIP
...     store = tessera.open_store(s3.url("my/prefix"), **s3.storage_options())
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from types import TracebackType
from typing import IO

from tessera.errors import TesseraError
from tessera.testing._process import stop_process

DEFAULT_BUCKET = "tessera-test"
ACCESS_KEY_ID = "testing"
SECRET_ACCESS_KEY = "testing"
REGION = "us-east-1"


class S3TestServerError(TesseraError, RuntimeError):
    """The S3 test server could not be started."""


class S3TestServer:
    """moto's S3 server in a child process on ``127.0.0.1``, with a bucket ready.

    By default the server is patched so that a ranged GET costs the same whatever the object
    size, connections are kept alive (uvicorn), TCP_NODELAY is set and plain GETs skip moto's
    request dispatch (see ``_moto_main``). Pass ``stock=True`` for moto exactly as shipped.

    Attributes:
        bucket: the bucket created at start.
        endpoint: ``http://127.0.0.1:PORT``.
        host, port: where it listens.
    """

    def __init__(
        self,
        bucket: str = DEFAULT_BUCKET,
        *,
        host: str = "127.0.0.1",
        stock: bool = False,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.bucket = bucket
        self.host = host
        self.port = 0
        self.stock = stock
        self.start_timeout_s = start_timeout_s
        self.access_key_id = ACCESS_KEY_ID
        self.secret_access_key = SECRET_ACCESS_KEY
        self.region = REGION
        self._proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> S3TestServer:
        """Start the child process and wait until the bucket exists."""
        if self._proc is not None:
            return self
        cmd = [sys.executable, "-m", "tessera.testing._moto_main", "--host", self.host,
               "--port", "0", "--bucket", self.bucket]
        if self.stock:
            cmd.append("--stock")
        env = dict(os.environ)
        env.setdefault("MOTO_ALLOW_NONEXISTENT_REGION", "true")
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self._proc = proc
        assert proc.stdout is not None
        line = _readline_with_timeout(proc.stdout, self.start_timeout_s)
        if not line.startswith(b"TESSERA_S3_READY "):
            self.stop()
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise S3TestServerError(
                f"the S3 test server did not start (got {line!r}); its stderr:\n{err[-4000:]}"
            )
        self.port = int(line.split()[1])
        # Drain stderr so a chatty server never blocks on a full pipe.
        threading.Thread(target=_drain, args=(proc.stderr,), daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop the child process (SIGTERM, then SIGKILL after 10 s)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stop_process(proc, 10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> S3TestServer:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    # -- what clients need -----------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def endpoint(self) -> str:
        """The HTTP endpoint, ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    def url(self, prefix: str = "") -> str:
        """``s3://bucket/prefix`` for :func:`tessera.open_store`."""
        prefix = prefix.strip("/")
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"

    def unique_url(self, label: str = "t") -> str:
        """A fresh prefix in the bucket, so tests never see each other's objects."""
        return self.url(f"{label}-{uuid.uuid4().hex[:12]}")

    def storage_options(self, endpoint: str | None = None) -> dict[str, str | bool]:
        """Options for :func:`tessera.open_store` (``endpoint`` overrides, e.g. a link proxy)."""
        return {
            "endpoint": endpoint or self.endpoint,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "allow_http": True,
        }

    def environ(self, *, allow_http: bool = True) -> dict[str, str]:
        """The ``AWS_*`` variables that point obstore (and so Tessera) at this server, as
        MinIO or LocalStack users configure every tool (``allow_http=False`` leaves out
        ``AWS_ALLOW_HTTP``, a common mistake).

        >>> S3TestServer().environ()["AWS_ALLOW_HTTP"]
        'true'
        """
        env = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": self.region,
               "AWS_ACCESS_KEY_ID": self.access_key_id,
               "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        if allow_http:
            env["AWS_ALLOW_HTTP"] = "true"
        return env

    def create_bucket(self, name: str) -> None:
        """Create another bucket."""
        import urllib.request

        req = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()


def _readline_with_timeout(stream: IO[bytes], timeout_s: float) -> bytes:
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline()), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    reader.join(max(0.0, deadline - time.monotonic()))
    return result[0].strip() if result else b""


def _drain(stream: IO[bytes] | None) -> None:
    if stream is None:
        return
    try:
        while stream.read(65536):
            pass
    except (OSError, ValueError):
        pass
