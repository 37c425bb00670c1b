"""pytest fixtures that run one test over ``memory://``, ``file://`` and S3.

Enable them in a ``conftest.py`` with ``pytest_plugins = ["tessera.testing.fixtures"]``.

* ``s3_server`` (session): an :class:`~tessera.testing.S3TestServer` in its own process.
* ``azurite_server`` (session): an :class:`~tessera.testing.azurite.AzuriteServer` (Azure
  Blob emulator), or a skip naming why when Azurite is not installed.
* ``store_url`` (parametrised ``memory``, ``file``, ``s3``): ``(url, storage_options)`` of a
  fresh, empty location, unique per test.
* ``store``: :func:`tessera.open_store` on ``store_url``.
* ``linked_s3``: ``(server, link, url, options)``, an S3 location reached through an
  :class:`~tessera.testing.EmulatedLink` with no delay, for fault injection.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tessera
from tessera.testing.azurite import AzuriteServer, azurite_command
from tessera.testing.link import EmulatedLink
from tessera.testing.s3server import S3TestServer

BACKENDS = ("memory", "file", "s3")
StoreLocation = tuple[str, dict[str, Any]]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3TestServer]:
    """One S3 test server for the whole session."""
    with S3TestServer() as server:
        yield server


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[AzuriteServer]:
    """One Azurite (Azure Blob emulator) for the whole session; tests that use it are skipped
    when Azurite is not installed (``make test`` installs it where npm exists)."""
    if azurite_command() is None:
        pytest.skip("Azurite is not installed (make test installs it with npm; or set "
                    "TESSERA_AZURITE to its azurite-blob)")
    with AzuriteServer() as server:
        yield server


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreLocation:
    """A fresh location on each backend: ``(url, storage_options)``."""
    kind = request.param
    if kind == "memory":
        return f"memory://test-{uuid.uuid4().hex[:12]}", {}
    if kind == "file":
        return (tmp_path / "store").as_uri(), {}
    server: S3TestServer = request.getfixturevalue("s3_server")
    return server.unique_url(), dict(server.storage_options())


@pytest.fixture
def store(store_url: StoreLocation) -> tessera.Store:
    """:func:`tessera.open_store` on a fresh location of each backend."""
    url, options = store_url
    return tessera.open_store(url, **options)


@pytest.fixture
def linked_s3(
    s3_server: S3TestServer,
) -> Iterator[tuple[S3TestServer, EmulatedLink, str, dict[str, Any]]]:
    """An S3 location behind an emulated link (no delay, no cap) for fault injection."""
    with EmulatedLink(s3_server.port) as link:
        yield s3_server, link, s3_server.unique_url(), dict(
            s3_server.storage_options(endpoint=link.endpoint))
