"""Tensor tables live on persistent stores: each test runs on file:// and the S3 test server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")


@pytest.fixture(params=["file", "s3"])
def table_url(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A fresh, empty location: ``(url, storage_options)``."""
    if request.param == "file":
        return (tmp_path / "table").as_uri(), {}
    server = request.getfixturevalue("s3_server")
    return server.unique_url("tt"), dict(server.storage_options())
