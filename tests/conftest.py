from __future__ import annotations

import pytest

pytest_plugins = ["tessera.testing.fixtures"]


@pytest.fixture(autouse=True)
def _isolated_profiles(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans in tests use the built-in profiles, never one saved on this machine."""
    monkeypatch.setenv("TESSERA_PROFILE_DIR", str(tmp_path_factory.mktemp("profiles")))
