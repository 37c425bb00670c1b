"""Shared fixtures of the frozen-layer tests: a models folder with small-input models
(random weights from a seed), an array of stored uint8 samples in a served root, and the
pushdown app serving both in-process (httpx's ASGI transport)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import httpx  # noqa: E402

import tessera  # noqa: E402
from tessera.config import ServerConfig  # noqa: E402
from tessera.frozen.manifest import InputSpec  # noqa: E402
from tessera.frozen.models import init_model  # noqa: E402
from tessera.pushdown.client import PushdownClient  # noqa: E402
from tessera.server.app import create_app  # noqa: E402

SIZE = 32
N = 48


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    init_model("resnet18", folder, seed=0, name="r18", input=InputSpec(height=SIZE, width=SIZE))
    init_model("alexnet", folder, seed=1, name="alex", num_classes=10,
               input=InputSpec(height=64, width=64))
    return folder


@dataclasses.dataclass
class Served:
    root: Path
    models: Path
    array: tessera.Array
    stored: np.ndarray
    labels: np.ndarray
    app: Any

    def client(self, transport: httpx.AsyncBaseTransport | None = None) -> PushdownClient:
        return PushdownClient("http://pushdown", token="",
                              transport=transport or httpx.ASGITransport(self.app))


def serve(root: Path, models: Path, **config: Any) -> Any:
    return create_app(tessera.open_store(root.as_uri()), token=None,
                      config=ServerConfig(models_dir=str(models), **config))


@pytest.fixture
def served(tmp_path: Path, models_dir: Path) -> Served:
    root = tmp_path / "root"
    stored = np.random.default_rng(0).integers(0, 256, (N, 3, SIZE, SIZE), dtype=np.uint8)
    arr = tessera.from_numpy((root / "imgs").as_uri(), stored, tile=(1, 3, SIZE, SIZE))
    labels = np.random.default_rng(1).integers(0, 4, N)
    return Served(root, models_dir, arr, stored, labels, serve(root, models_dir))


@pytest.fixture
def make_app() -> Any:
    """``make_app(root, models, **server config)``: a pushdown app with a models folder."""
    return serve
