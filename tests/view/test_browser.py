"""The viewer in a real headless browser (Debian's chromium driven by Playwright): every page
loads with no console error and no failed request, and what the pages show equals what
Tessera reads: the slice viewer's pixels after the colour map, images closer to the original
at k = 63 than at k = 1 (PSNR of the screenshot's pixels), the plan beside the slice equal
to ``explain()``, an older version through the time line. Skipped, saying why, where
chromium or Playwright is missing (``make install`` installs both where apt works)."""

from __future__ import annotations

import io
import json
import math
import shutil
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from PIL import Image

import tessera
from tessera.images import psnr
from tessera.testing.view_store import SampleStore
from tessera.view import Viewer, running
from tessera.view.pictures import colour

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed "
                               "(it comes with `make install`)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (`make "
                                "install` installs Debian's package where apt works)")
#: Chromium's flags on a machine without a network or a screen.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--disable-quic"]
PAGES = ["#/", "#/array/volume", "#/array/points", "#/array/legacy.h5/scans/first",
         "#/table/tensors", "#/table/tensors?id=weights%2Fvector", "#/images/photos",
         "#/image/photos?id=3&k=4", "#/h5/legacy.h5"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def address(sample: SampleStore) -> Iterator[str]:
    with running(Viewer(sample.url)) as url:
        yield url


class Watched:
    """A page and what went wrong in it: console errors, page errors, failed requests."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.opened = 0
        self.problems: list[str] = []
        page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        page.on("response", lambda r: self.problems.append(f"HTTP {r.status}: {r.url}")
                if r.status >= 400 else None)

    def open(self, address: str, fragment: str) -> None:
        """Load ``fragment`` as a new document (a query of its own, so that the page is
        loaded again, not only its ``#`` part changed) and wait until it is drawn."""
        self.opened += 1
        self.page.goto(f"{address}&visit={self.opened}{fragment}")
        self.settle()

    def settle(self, before: str | None = None) -> None:
        """Wait until the page is drawn (and drawn again, when ``before`` is the count of
        drawings before an action)."""
        selector = "body[data-state=ready]"
        if before is not None:
            selector += f":not([data-renders='{before}'])"
        self.page.wait_for_selector(selector, timeout=30_000)

    def renders(self) -> str:
        return self.page.get_attribute("body", "data-renders") or ""

    def shot(self, selector: str) -> np.ndarray:
        box = self.page.locator(selector).bounding_box()
        assert box is not None and box["x"] == int(box["x"]) and box["y"] == int(box["y"]), \
            f"{selector} is not on whole pixels ({box}): its pixels would be resampled"
        png = self.page.locator(selector).screenshot()
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 1000},
                                  device_scale_factor=1)
    yield Watched(context.new_page())
    context.close()


def test_every_page_loads_with_no_console_error_and_no_failed_request(page, address) -> None:
    for fragment in PAGES:
        page.open(address, fragment)
        assert not page.page.is_visible("#error"), (fragment, page.page.inner_text("#error"))
        assert page.page.inner_text("main").strip(), fragment
    assert page.problems == []


def test_the_tree_links_every_kind(page, address) -> None:
    page.open(address, "#/")
    rows = page.page.locator("#tree tbody tr")
    seen = {rows.nth(i).get_attribute("data-kind") for i in range(rows.count())}
    assert seen == {"array", "tensor table", "image set", "tessera.h5 file"}
    before = page.renders()
    page.page.click("text=photos")
    page.settle(before)  # the image set's page drawn, not the tree still on screen
    assert page.page.locator("#sheet").is_visible()


def _slice(address: str, **params: object) -> str:
    base = {"axes": "1,2", "zoom": 1, "y0": 0, "x0": 0, "plan": 0}
    return "#/array/volume?" + "&".join(f"{k}={quote(str(v))}" for k, v in
                                        {**base, **params}.items())


def test_the_slice_viewer_shows_the_slice_through_the_colour_map(page, address,
                                                                  sample) -> None:
    page.open(address, _slice(address, index="2,0,0", cmap="cubehelix", vmin=-100, vmax=1000))
    shown = page.shot("#slice")[:300, :400]
    np.testing.assert_array_equal(shown, colour(sample.volume[2], -100, 1000, "cubehelix"))
    assert page.problems == []


def test_the_plan_beside_the_slice_is_explains_plan(page, address, sample) -> None:
    page.open(address, _slice(address, index="1,0,0", plan=1))
    panel = page.page.locator("#plan")
    selection = panel.get_attribute("data-selection")
    assert selection == "1, 0:300:1, 0:400:1"
    plan = tessera.open(f"{sample.url}/volume").explain((1, slice(0, 300, 1),
                                                         slice(0, 400, 1)))
    assert json.loads(panel.get_attribute("data-methods") or "") == plan.methods
    assert int(panel.get_attribute("data-bytes") or -1) == plan.totals.nbytes
    for method, tiles in plan.methods.items():
        assert f"{method} {tiles}" in page.page.inner_text("#methods")
    with_plan = page.shot("#viewport")
    page.page.uncheck("#show-plan")
    assert (page.shot("#viewport") != with_plan).any()  # the tile grid was drawn


def test_the_time_line_shows_the_older_version(page, address, sample) -> None:
    page.open(address, _slice(address, index="1,0,0", vmin=-50, vmax=996))
    np.testing.assert_array_equal(page.shot("#slice")[:300, :400],
                                  colour(sample.volume[1], -50, 996, "gray"))
    page.page.locator("#time").fill("0")
    page.page.wait_for_selector(f"#slice[data-at='{sample.first_marker}']", timeout=30_000)
    page.settle()
    np.testing.assert_array_equal(page.shot("#slice")[:300, :400],
                                  colour(sample.volume_before[1], -50, 996, "gray"))
    assert page.problems == []


def test_an_image_at_k_63_is_closer_to_the_original_than_at_k_1(page, address,
                                                                sample) -> None:
    page.open(address, "#/image/photos?id=5&k=1")
    page.page.wait_for_selector("#image[data-k='1']")
    low = page.shot("#image")[1:-1, 1:-1]  # inside its 1-pixel border
    page.page.locator("#k").fill("63")
    page.page.wait_for_selector("#image[data-k='63']", timeout=30_000)
    high = page.shot("#image")[1:-1, 1:-1]
    original = sample.images[5]
    assert low.shape == high.shape == original.shape
    assert psnr(original, high) > psnr(original, low) + 10
    assert page.page.inner_text("#psnr") == "exact"
    assert page.problems == []


def test_requests_without_the_token_get_403(browser, address) -> None:
    context = browser.new_context()
    try:
        answer = context.new_page().goto(address.split("?")[0])
        assert answer is not None and answer.status == 403
        assert "token" in answer.text()
    finally:
        context.close()


def test_a_path_outside_the_store_is_refused_on_the_page(page, address) -> None:
    page.open(address, "#/array/..%2F..%2Fetc")
    assert "not inside the viewed store" in page.page.inner_text("#error")
    assert any("HTTP 400" in p for p in page.problems)


def test_the_value_under_the_cursor_and_zoom_and_pan(page, address, sample) -> None:
    page.open(address, _slice(address, index="2,0,0"))
    box = page.page.locator("#viewport").bounding_box()
    assert box is not None
    page.page.mouse.move(box["x"] + 1 + 123, box["y"] + 1 + 45)  # inside the 1-pixel border
    page.page.wait_for_selector("#cursor:has-text('=')", timeout=30_000)
    assert page.page.inner_text("#cursor") == \
        f"[2, 45, 123] data = {int(sample.volume[2, 45, 123])}"
    before = page.renders()
    page.page.click("#zoom-in")  # around the centre: cells per pixel 1 -> 1 / 1.5
    page.settle(before)
    zoom = 1 / 1.5
    top = 256 - 256 * zoom  # the centre stays; the box is clipped to the 300 x 400 plane
    assert page.page.get_attribute("#slice", "data-selection") == \
        f"2, {math.floor(top)}:300:1, {math.floor(top)}:400:1"
    before = page.renders()
    page.page.mouse.move(box["x"] + 300, box["y"] + 300)
    page.page.mouse.down()
    page.page.mouse.move(box["x"] + 200, box["y"] + 250, steps=5)
    page.page.mouse.up()  # dragged 100 pixels left and 50 up: the box moves right and down
    page.settle(before)
    assert page.page.get_attribute("#slice", "data-selection") == \
        f"2, {math.floor(top + 50 * zoom)}:300:1, {math.floor(top + 100 * zoom)}:400:1"
    assert page.problems == []
