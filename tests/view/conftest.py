"""The sample store the viewer's tests look at, written once per session."""

from __future__ import annotations

import pytest

from tessera.testing.view_store import SampleStore, sample_store


@pytest.fixture(scope="session")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleStore:
    return sample_store(str(tmp_path_factory.mktemp("view") / "store"))
