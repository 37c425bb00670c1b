"""An Azure Blob Storage emulator (Microsoft's Azurite) on a free loopback port, in its own
process, with a container ready: the second cloud backend the test suite can run here.

Azurite is a Node.js program. ``make test`` installs it (``npm install --prefix
.venv/azurite azurite``) when ``npm`` exists; :func:`azurite_command` finds it there, at
``TESSERA_AZURITE`` or on ``PATH``, and tests that need it are skipped with that reason when
it is missing.

Unlike the S3 test server, the Node.js child does not notice a parent killed with SIGKILL;
the fixture stops it at the end of the session, and its data lives in memory only.

Clients reach it the way Azure users reach the emulator, by the environment alone
(:meth:`AzuriteServer.environ`: ``AZURE_STORAGE_USE_EMULATOR=true`` and
``AZURITE_BLOB_STORAGE_URL``; obstore then uses Azurite's well-known development account):

>>> with AzuriteServer() as az:                                   # doctest: +SKIP
...     os.environ.update(az.environ())
...     store = tessera.open_store(az.unique_url())
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import TracebackType

from tessera.errors import TesseraError
from tessera.testing.pushdown import free_port

#: Azurite's well-known development account (public, documented by Microsoft).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")
DEFAULT_CONTAINER = "tessera-test"


class AzuriteError(TesseraError, RuntimeError):
    """Azurite is not installed, or did not start."""


def azurite_command() -> list[str] | None:
    """The command that runs Azurite's blob service, or ``None`` when it is not installed:
    ``TESSERA_AZURITE`` (a path), then ``<venv>/azurite/node_modules/.bin/azurite-blob``,
    then ``azurite-blob`` on ``PATH``."""
    given = os.environ.get("TESSERA_AZURITE")
    if given:
        return [given]
    local = Path(sys.prefix, "azurite", "node_modules", ".bin", "azurite-blob")
    if local.exists():
        return [str(local)]
    found = shutil.which("azurite-blob")
    return [found] if found else None


class AzuriteServer:
    """Azurite's blob service in a child process on ``127.0.0.1``, data in memory.

    Attributes:
        container: the container created at start.
        port: where it listens.
        endpoint: ``http://127.0.0.1:PORT`` (the account's blob URL is ``endpoint/ACCOUNT``).
    """

    def __init__(self, container: str = DEFAULT_CONTAINER, *,
                 start_timeout_s: float = 60.0) -> None:
        self.container = container
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = Path(tempfile.gettempdir(), f"tessera-azurite-{uuid.uuid4().hex}.log")

    def start(self) -> AzuriteServer:
        """Start Azurite and wait until the container exists."""
        if self._proc is not None:
            return self
        command = azurite_command()
        if command is None:
            raise AzuriteError("Azurite is not installed: `make test` installs it with npm "
                               "(Node.js); or set TESSERA_AZURITE to its azurite-blob")
        self.port = free_port()
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                [*command, "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                 "--inMemoryPersistence", "--skipApiVersionCheck", "--silent"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                text = self._log.read_text(errors="replace")[-4000:]
                self.stop()
                raise AzuriteError(f"Azurite did not start on port {self.port}; its log:\n"
                                   f"{text}")
            try:
                self.create_container(self.container)
                return self
            except urllib.error.HTTPError as err:  # it answers, and refuses
                self.stop()
                raise AzuriteError(f"Azurite refused to create container "
                                   f"{self.container!r}: HTTP {err.code}") from None
            except OSError:  # not listening yet
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the child process at once (SIGKILL): its data lives in memory only, and
        Azurite 3.37 took over 10 s to act on SIGTERM or SIGINT here."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
        self._log.unlink(missing_ok=True)

    def __enter__(self) -> AzuriteServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def environ(self) -> dict[str, str]:
        """The variables that point obstore (and so Tessera) at this emulator."""
        return {"AZURE_STORAGE_USE_EMULATOR": "true",
                "AZURITE_BLOB_STORAGE_URL": self.endpoint}

    def url(self, prefix: str = "") -> str:
        """``az://container/prefix``."""
        prefix = prefix.strip("/")
        return f"az://{self.container}/{prefix}" if prefix else f"az://{self.container}"

    def unique_url(self, label: str = "t") -> str:
        """A fresh prefix in the container."""
        return self.url(f"{label}-{uuid.uuid4().hex[:12]}")

    def create_container(self, name: str) -> None:
        """Create a container (one request signed with the development account's key)."""
        date = email.utils.formatdate(usegmt=True)
        headers = {"x-ms-date": date, "x-ms-version": "2021-08-06"}
        # Shared Key authorization: the verb, eleven empty standard headers (no body, no
        # conditions), the x-ms-* headers sorted, then the resource and its query.
        to_sign = ("PUT\n" + "\n" * 11
                   + "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
                   + f"/{ACCOUNT}/{ACCOUNT}/{name}\nrestype:container")
        signature = base64.b64encode(hmac.new(base64.b64decode(ACCOUNT_KEY), to_sign.encode(),
                                              hashlib.sha256).digest()).decode()
        request = urllib.request.Request(
            f"{self.endpoint}/{ACCOUNT}/{name}?restype=container", method="PUT",
            headers={**headers, "Authorization": f"SharedKey {ACCOUNT}:{signature}",
                     "Content-Length": "0"})
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
