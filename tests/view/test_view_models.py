"""The viewer's frozen-models page (``--models FOLDER``): the registered models with their
layers, and the split estimates of a saved split profile, over HTTP and in the browser."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

import tessera

torch = pytest.importorskip("torch")

from tessera.frozen.inventory import layer_infos  # noqa: E402
from tessera.frozen.manifest import InputSpec  # noqa: E402
from tessera.frozen.models import init_model  # noqa: E402
from tessera.frozen.planner import SplitProfile, choose  # noqa: E402
from tessera.view import Viewer, running  # noqa: E402
from tessera.view.models import BATCH  # noqa: E402

PROFILE = SplitProfile(names=("a", "b", "c", "d"), out_bytes=(4000, 1000, 500, 40),
                       input_bytes=3000, freeze=3, server_fwd_s=(0.01, 0.01, 0.01),
                       client_fwd_s=(0.01, 0.01, 0.01, 0.002), train_s=0.004, bandwidth=1e6,
                       rtt_s=0.001)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("models")
    tessera.from_numpy(str(root / "data" / "a"), np.zeros(4))
    init_model("resnet18", root / "models", name="r18", num_classes=10,
               input=InputSpec(height=32, width=32))
    (root / "models" / "r18.split-profile.json").write_text(json.dumps(PROFILE.to_json()))
    with running(Viewer(str(root / "data"), models=root / "models")) as address:
        yield address, root


def test_the_models_page_lists_layers_and_split_estimates(served) -> None:
    address, _ = served
    base, token = address.split("?token=")
    doc = httpx.get(base + "api/models", params={"token": token}, timeout=60).json()
    (model,) = doc["models"]
    infos = layer_infos("resnet18", 10, (3, 32, 32))
    assert model["name"] == "r18" and len(model["layers"]) == len(infos)
    assert [layer["bytes"] for layer in model["layers"]] == [i.nbytes for i in infos]
    plan = choose(PROFILE, BATCH)
    assert model["chosen"] == plan.split
    assert [c["epoch_s"] for c in model["candidates"]] == \
        pytest.approx([c.epoch_s for c in plan.candidates])
    about = httpx.get(base + "api/about", params={"token": token}, timeout=60).json()
    assert about["models"] is True


def test_without_models_the_page_says_how_to_show_them(tmp_path: Path) -> None:
    tessera.from_numpy(str(tmp_path / "a"), np.zeros(4))
    with running(Viewer(str(tmp_path))) as address:
        base, token = address.split("?token=")
        answer = httpx.get(base + "api/models", params={"token": token}, timeout=60)
    assert answer.status_code == 400 and "--models FOLDER" in answer.json()["error"]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium on this machine")
def test_the_models_page_loads_in_the_browser(served) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    from test_browser import FLAGS, Watched

    address, _ = served
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        try:
            page = Watched(browser.new_page())
            page.open(address, "#/models")
            assert "r18 (resnet18)" in page.page.inner_text("main")
            assert page.page.locator("svg.split rect").count() == len(PROFILE.names)
            assert page.problems == []
        finally:
            browser.close()
