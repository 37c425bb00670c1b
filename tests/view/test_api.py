"""The viewer's JSON API, served on a thread and asked over HTTP: the token, read-only, paths kept
inside the store, the budget, errors as messages, and answers equal to what Tessera reads."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from PIL import Image

import tessera
from tessera.images import psnr
from tessera.testing.view_store import SampleStore
from tessera.view import HANDLERS, Viewer, running
from tessera.view.app import cookie_name
from tessera.view.pictures import colour

TOKEN = "test-token-1234"


@pytest.fixture(scope="module")
def client(sample: SampleStore) -> Iterator[httpx.Client]:
    with running(Viewer(sample.url), token=TOKEN) as address, \
            httpx.Client(base_url=address.split("?")[0], timeout=60) as http:
        yield http


def get(client: httpx.Client, name: str, **params: object) -> dict:
    answer = client.get(f"/api/{name}", params={"token": TOKEN, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def pixels(data_url: str) -> np.ndarray:
    assert data_url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))))


def test_requests_without_the_token_get_403_and_the_token_sets_a_cookie(client) -> None:
    for path in ("/", "/api/tree", "/static/app.js", "/favicon.ico"):
        assert client.get(path).status_code == 403, path
    wrong = client.get("/api/tree", params={"token": TOKEN + "x"})
    assert wrong.status_code == 403 and "token" in wrong.text
    page = client.get("/", params={"token": TOKEN})
    assert page.status_code == 200 and "app.js" in page.text
    assert "HttpOnly" in page.headers["set-cookie"]
    assert page.cookies.get(cookie_name(TOKEN)) == TOKEN
    for given, status in ((TOKEN, 200), ("nope", 403)):
        with httpx.Client(base_url=client.base_url,
                          cookies={cookie_name(TOKEN): given}) as fresh:
            assert fresh.get("/api/tree").status_code == status


def test_there_is_no_way_to_write(client) -> None:
    for method in ("post", "put", "delete", "patch"):
        answer = client.request(method.upper(), "/api/tree", params={"token": TOKEN})
        assert answer.status_code == 405, method


@pytest.mark.parametrize("path", ["../outside", "volume/../../x", "/etc/passwd", "a//b",
                                  "volume\\..\\x", "s3://other-bucket/x", "volume/%2e%2e"])
def test_a_path_outside_the_store_is_refused_with_a_message(client, path) -> None:
    answer = client.get("/api/array", params={"token": TOKEN, "path": path})
    assert answer.status_code == 400
    assert "not inside the viewed store" in answer.json()["error"]


def test_the_tree_names_every_kind(client) -> None:
    kinds = {e["path"]: e["kind"] for e in get(client, "tree")}
    assert kinds == {"volume": "array", "points": "array", "tensors": "tensor table",
                     "photos": "image set", "legacy.h5": "tessera.h5 file",
                     "legacy.h5/scans/first": "array"}
    sizes = {e["path"]: e["size"] for e in get(client, "tree")}
    on_disk = sum(o.size for o in tessera.open_store(get(client, "about")["url"]).list("volume/"))
    assert sizes["volume"] == on_disk


def test_an_array_view_is_the_slice_through_the_colour_map(client, sample) -> None:
    doc = get(client, "array/view", path="volume", axes="1,2", index="2,0,0", y0=40,
              y1=240, x0=10, x1=390, cmap="cubehelix", vmin=-100, vmax=1000)
    expected = colour(sample.volume[2, 40:240, 10:390], -100, 1000, "cubehelix")
    assert doc["step"] == 1 and doc["box"] == [40, 240, 10, 390]
    np.testing.assert_array_equal(pixels(doc["image"]), expected)
    # the histogram counts every value drawn in 64 bins of the colour range
    scaled = (sample.volume[2, 40:240, 10:390] - -100.0) * (255 / 1100)  # as the viewer does
    bins = np.clip(np.rint(scaled), 0, 255).astype(int) // 4
    assert doc["histogram"]["counts"] == np.bincount(bins.ravel(), minlength=64).tolist()
    # the plan beside it is the plan explain() gives for the same selection
    arr = tessera.open(f"{sample.url}/volume")
    plan = arr.explain((2, slice(40, 240, 1), slice(10, 390, 1)))
    assert doc["selection"] == "2, 40:240:1, 10:390:1"
    assert doc["methods"] == plan.methods
    assert doc["estimated"]["bytes"] == plan.totals.nbytes
    assert doc["estimated"]["requests"] == len(plan.requests)
    assert doc["measured"]["bytes"] > 0
    assert len(doc["tiles"]) == doc["tiles_planned"] == len(plan.choices)


def test_a_zoomed_out_view_reads_a_strided_sample(client, sample) -> None:
    doc = get(client, "array/view", path="volume", axes="2,1", index="0,0,0", w=100, h=100)
    assert doc["step"] == 4  # 400 positions into 100 pixels
    values = sample.volume[0, ::4, ::4].T  # x down, y across
    np.testing.assert_array_equal(pixels(doc["image"]),
                                  colour(values, values.min(), values.max(), "gray"))


def test_a_point_in_time_shows_that_version(client, sample) -> None:
    at = str(sample.first_marker)
    doc = get(client, "array/view", path="volume", at=at, index="1,0,0", vmin=-50, vmax=996)
    np.testing.assert_array_equal(pixels(doc["image"]),
                                  colour(sample.volume_before[1], -50, 996, "gray"))
    assert get(client, "array/value", path="volume", at=at, index="1,150,150")["value"] == \
        int(sample.volume_before[1, 150, 150])
    assert get(client, "array/value", path="volume", index="1,150,150")["value"] == -50
    history = get(client, "array", path="volume")["history"]
    assert history[0]["marker"] == at  # a commit time in ns survives JSON exactly


def test_a_sparse_array_draws_its_cells_as_points(client, sample) -> None:
    doc = get(client, "array/view", path="points", w=1000, h=1000)
    cells = tessera.open(f"{sample.url}/points")[0:1000, 0:1000]
    drawn = pixels(doc["image"])
    assert drawn.shape == (1000, 1000, 4)
    assert doc["cells"] == len(cells.coords[0])
    assert (drawn[..., 3] == 255).sum() == len(set(zip(*map(list, cells.coords),
                                                         strict=True)))
    assert drawn[cells.coords[0], cells.coords[1], 3].min() == 255


def test_a_view_over_the_budget_is_refused_with_a_message(sample) -> None:
    with running(Viewer(sample.url, budget_bytes=1000), token=TOKEN) as address:
        answer = httpx.get(address.split("?")[0] + "api/array/view",
                           params={"token": TOKEN, "path": "volume"})
    assert answer.status_code == 413
    assert "over the viewer's budget of 1,000 bytes" in answer.json()["error"]


def test_bad_parameters_name_themselves(client) -> None:
    cases = {"axes=1,1": "axes", "index=9,0,0": "index[0]", "y0=abc": "'y0'",
             "cmap=rainbow": "'cmap'", "attr=nope": "'attr'", "w=0": "'w'"}
    for query, named in cases.items():
        answer = client.get(f"/api/array/view?token={TOKEN}&path=volume&{query}")
        assert answer.status_code == 400, query
        assert named in answer.json()["error"], (query, answer.json())
    missing = client.get("/api/array", params={"token": TOKEN, "path": "nothing-here"})
    assert missing.status_code == 404 and "nothing-here" in missing.json()["error"]
    wrong = client.get("/api/table", params={"token": TOKEN, "path": "volume"})
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "volume is an array, not a tensor table"
    assert client.get(f"/api/nope?token={TOKEN}").status_code == 404


def test_an_unexpected_failure_is_a_message_not_a_traceback(client, monkeypatch) -> None:
    def broken(viewer, q):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(HANDLERS, "tree", broken)
    answer = client.get("/api/tree", params={"token": TOKEN})
    assert answer.status_code == 500
    assert answer.json() == {"error": "RuntimeError: disk on fire"}


def test_a_tensor_preview_is_its_values(client, sample) -> None:
    table = tessera.open(f"{sample.url}/tensors")
    doc = get(client, "table/tensor", path="tensors", id="weights/dense")
    values = table["weights/dense"].read()
    assert doc["shape"] == [64, 80] and doc["density"] is None and doc["files"] >= 1
    np.testing.assert_array_equal(pixels(doc["image"]),
                                  colour(values, values.min(), values.max(), "gray"))
    sparse = get(client, "table/tensor", path="tensors", id="weights/sparse")
    assert sparse["density"] == pytest.approx(table["weights/sparse"].nnz / (40 * 50))
    vector = get(client, "table/tensor", path="tensors", id="weights/vector")
    assert vector["numbers"] == list(range(10))
    page = get(client, "table", path="tensors", prefix="weights/d")
    assert page["ids"] == ["weights/dense"] and page["matching"] == 1


def test_an_image_at_k_max_is_closer_to_the_original_than_at_k_1(client, sample) -> None:
    low = get(client, "images/image", path="photos", id=5, k=1)
    high = get(client, "images/image", path="photos", id=5, k=63)
    original = sample.images[5]
    assert psnr(original, pixels(high["image"])) > psnr(original, pixels(low["image"])) + 10
    assert low["measured"]["bytes"] < high["measured"]["bytes"]
    assert low["psnr"] < 30 and high["psnr"] is None  # k max against itself is exact


def test_a_page_of_thumbnails_reads_one_scale_and_names_what_it_touched(client) -> None:
    doc = get(client, "images/grid", path="photos", per=5, page=1)
    assert doc["ids"] == [5, 6, 7, 8, 9] and doc["pages"] == 3
    assert doc["groups"] == [1, 2]  # groups of 4 images
    assert pixels(doc["image"]).shape == (64, 5 * 64, 3)
    curve = get(client, "images/curve", path="photos")
    assert curve["k"][-1] == 63 and curve["psnr"][-1] is None
    assert curve["bytes_per_image"] == sorted(curve["bytes_per_image"])


def test_a_tessera_h5_file_lists_its_datasets(client) -> None:
    doc = get(client, "h5", path="legacy.h5")
    assert doc["datasets"] == [{"name": "scans/first", "shape": [48, 48], "dtype": "float64"}]


def test_a_zoomed_out_view_reads_through_a_pushdown_server(sample) -> None:
    from tessera.testing.pushdown import PushdownTestServer

    with PushdownTestServer(sample.url) as server, \
            running(Viewer(sample.url, pushdown=server.client()), token=TOKEN) as address:
        http = httpx.Client(base_url=address.split("?")[0], timeout=60)
        doc = http.get("api/array/view", params={"token": TOKEN, "path": "volume",
                                                  "index": "0,0,0", "w": 100,
                                                  "h": 100}).json()
        whole = http.get("api/array/view", params={"token": TOKEN, "path": "volume",
                                                    "index": "0,0,0"}).json()
    assert doc["step"] == 4 and set(doc["methods"]) == {"pushdown"}
    values = sample.volume[0, ::4, ::4]
    np.testing.assert_array_equal(pixels(doc["image"]),
                                  colour(values, values.min(), values.max(), "gray"))
    # only the sampled cells (a 16th of the plane) crossed the link, not the tiles
    assert doc["estimated"]["bytes"] < values.nbytes * 2 < whole["estimated"]["bytes"] / 4
    assert whole["step"] == 1


def test_the_viewer_shows_a_store_on_the_s3_test_server(s3_server) -> None:
    url, options = s3_server.unique_url("view"), dict(s3_server.storage_options())
    values = np.arange(60 * 70, dtype=np.float32).reshape(60, 70)
    tessera.from_numpy(f"{url}/frames", values, tile=(16, 16), storage_options=options)
    cols = tessera.create_images(f"{url}/photos", size=(32, 32), storage_options=options)
    cols.append(np.zeros((3, 32, 32, 3), np.uint8))
    with running(Viewer(url, storage_options=options), token=TOKEN) as address:
        http = httpx.Client(base_url=address.split("?")[0], timeout=60,
                            params={"token": TOKEN})
        tree = {e["path"]: e["kind"] for e in http.get("api/tree").json()}
        doc = http.get("api/array/view", params={"path": "frames", "cmap": "diverging"}).json()
        grid = http.get("api/images/grid", params={"path": "photos"}).json()
    assert tree == {"frames": "array", "photos": "image set"}
    np.testing.assert_array_equal(pixels(doc["image"]),
                                  colour(values, 0, values.max(), "diverging"))
    assert doc["measured"]["requests"] >= 1 and doc["estimated"]["pricing"] == "s3"
    assert grid["ids"] == [0, 1, 2]


def test_a_page_opened_again_shows_commits_made_since(tmp_path) -> None:
    table = tessera.create_table(str(tmp_path / "t"))
    table.write("first", np.zeros(3))
    with running(Viewer(str(tmp_path)), token=TOKEN) as address:
        http = httpx.Client(base_url=address.split("?")[0], timeout=60,
                            params={"token": TOKEN})
        assert http.get("api/table", params={"path": "t"}).json()["ids"] == ["first"]
        table.write("second", np.ones(3))  # a table handle stays at its version...
        page = http.get("api/table", params={"path": "t"}).json()  # ...a page opens anew
        assert page["ids"] == ["first", "second"] and len(page["history"]) == 3
        tensor = http.get("api/table/tensor", params={"path": "t", "id": "second"}).json()
        assert tensor["numbers"] == [1.0, 1.0, 1.0]
