from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

pytest_plugins = ["tessera.testing.fixtures"]


@pytest.fixture(autouse=True)
def _isolated_profiles(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans in tests use the built-in profiles, never one saved on this machine."""
    monkeypatch.setenv("TESSERA_PROFILE_DIR", str(tmp_path_factory.mktemp("profiles")))


@pytest.fixture
def docs_hook() -> Callable[[str], ModuleType]:
    """Loads a hook of the documentation site, ``mkdocs_ext/NAME.py``, as a module."""
    def load(name: str) -> ModuleType:
        path = Path(__file__).resolve().parents[1] / "mkdocs_ext" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
