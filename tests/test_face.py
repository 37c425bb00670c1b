"""One face for arrays, tensor tables and image sets: the same verbs, argument names, time
travel, history, plans, reprs and notebook views on every kind, checked by walking the
public API."""

from __future__ import annotations

import base64
import datetime as dt
import html.parser
import inspect
import io
import re
import warnings

import numpy as np
import pytest

import tessera
import tessera.h5
from tessera.images import ImageColumns
from tessera.images.face import png
from tessera.tables import TensorTable

OPENERS = {
    "tessera.open": tessera.open,
    "tessera.open_array": tessera.open_array,
    "tessera.open_table": tessera.open_table,
    "tessera.open_images": tessera.open_images,
    "TensorTable.open": TensorTable.open,
    "ImageColumns.open": ImageColumns.open,
}
CREATORS = {
    "tessera.create_array": tessera.create_array,
    "tessera.from_numpy": tessera.from_numpy,
    "tessera.create_table": tessera.create_table,
    "tessera.create_images": tessera.create_images,
    "TensorTable.create": TensorTable.create,
    "ImageColumns.create": ImageColumns.create,
}


def _params(fn) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "cls"]


@pytest.mark.parametrize("name", sorted(OPENERS))
def test_every_opener_takes_url_mode_then_keyword_options_config_and_at(name) -> None:
    params = _params(OPENERS[name])
    assert [p.name for p in params[:2]] == ["url", "mode"] and params[1].default == "r"
    keyword = {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert {"storage_options", "config", "at"} <= keyword, name


@pytest.mark.parametrize("name", sorted(CREATORS))
def test_every_creator_takes_url_first_then_keyword_options_and_config(name) -> None:
    params = _params(CREATORS[name])
    assert params[0].name == "url"
    keyword = {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert {"storage_options", "config"} <= keyword, name


def _kinds(tmp_path):
    """One of each kind, written twice (two commits), with its url."""
    arr_url = (tmp_path / "a").as_uri()
    arr = tessera.from_numpy(arr_url, np.zeros((4, 4), np.int32), tile=(2, 2))
    arr[0:2, 0:2] = np.ones((2, 2), np.int32)
    table_url = (tmp_path / "t").as_uri()
    table = tessera.create_table(table_url)
    table.write("x", np.ones((3, 2)))
    table.write("y", np.zeros(5))
    images_url = (tmp_path / "i").as_uri()
    cols = tessera.create_images(images_url, size=(32, 32), group=2)
    rng = np.random.default_rng(0)
    cols.append(rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8))
    cols.append(rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8))
    return {"array": (arr_url, tessera.Array), "table": (table_url, TensorTable),
            "images": (images_url, ImageColumns)}


def _content(handle):
    if isinstance(handle, tessera.Array):
        return handle[:, :].tolist()
    if isinstance(handle, TensorTable):
        return sorted(handle.ids())
    return handle.ids().tolist()


def test_open_finds_each_kind_and_says_what_an_empty_place_holds(tmp_path) -> None:
    for _kind, (url, cls) in _kinds(tmp_path).items():
        assert isinstance(tessera.open(url), cls)
    h5_url = (tmp_path / "f").as_uri()
    with tessera.h5.File(h5_url, "w") as f:
        f["d"] = np.arange(3)
    with tessera.open(h5_url) as f:
        assert f["d"][:].tolist() == [0, 1, 2]
    (tmp_path / "empty").mkdir()
    with pytest.raises(tessera.DataNotFoundError, match="nothing"):
        tessera.open((tmp_path / "empty").as_uri())
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hi")
    with pytest.raises(FileNotFoundError, match=r"notes\.txt"):
        tessera.open((tmp_path / "other").as_uri())


def test_time_travel_takes_the_same_keyword_on_every_kind(tmp_path) -> None:
    for kind, (url, _cls) in _kinds(tmp_path).items():
        history = tessera.open(url).history()
        assert isinstance(history, tessera.History) and len(history) >= 2, kind
        first = history[-2]  # the commit before the newest
        native = tessera.open(url, at=first.marker)
        by_datetime = tessera.open(url, at=first.when)
        by_text = tessera.open(url, at=first.when.isoformat())
        newest = tessera.open(url)
        assert _content(native) == _content(by_datetime) == _content(by_text), kind
        assert _content(native) != _content(newest), kind


@pytest.mark.parametrize("kind", ["array", "table", "images"])
def test_a_point_before_the_first_commit_names_it(kind, tmp_path) -> None:
    url, _ = _kinds(tmp_path)[kind]
    first = tessera.open(url).history()[0].when
    with pytest.raises(tessera.BeforeFirstCommitError, match="before its first commit") as err:
        tessera.open(url, at=dt.datetime(2001, 1, 1, tzinfo=dt.UTC))
    assert err.value.first_commit is not None and abs(err.value.first_commit - first) \
        < dt.timedelta(seconds=1)
    assert first.isoformat()[:19] in str(err.value)


def test_explain_is_a_plan_and_last_read_is_kept_on_every_kind(tmp_path) -> None:
    kinds = _kinds(tmp_path)
    arr = tessera.open(kinds["array"][0])
    table = tessera.open(kinds["table"][0])
    cols = tessera.open(kinds["images"][0])
    plans = [arr.explain((slice(0, 2), slice(None))), table.explain("x", slice(0, 2)),
             table["x"].explain(slice(0, 2)), cols.explain([0, 1], k=4)]
    for plan in plans:
        assert isinstance(plan, tessera.Plan)
        summary = plan.to_dict()
        assert summary["requests"] >= 1 and summary["bytes"] > 0, summary
        assert "read plan" in str(plan)
    assert "tensor 'x'" in str(plans[1])
    arr[0, 0], table["x"][0], cols.read([0], k=2)
    assert arr.last_read is not None and table.last_read is not None
    assert cols.last_read is not None


class _Tags(html.parser.HTMLParser):
    """Checks that every opened tag is closed in order (void elements aside)."""

    VOID = frozenset({"br", "img", "meta", "link", "hr", "input"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag) -> None:
        assert self.stack and self.stack.pop() == tag, tag


def _parsed(text: str) -> _Tags:
    tags = _Tags()
    tags.feed(text)
    tags.close()
    assert not tags.stack, tags.stack
    return tags


def test_every_public_object_shows_itself(tmp_path) -> None:
    kinds = _kinds(tmp_path)
    arr = tessera.open(kinds["array"][0])
    table = tessera.open(kinds["table"][0])
    cols = tessera.open(kinds["images"][0])
    assert re.fullmatch(r"<tessera.Array \S+ shape=\(4, 4\) int32 tiles=\(2, 2\) mode='r' "
                        r"2 fragments>", repr(arr))
    assert re.fullmatch(r"<tessera.TensorTable \S+ mode='r' version 2, 2 tensors>", repr(table))
    assert re.fullmatch(r"<tessera.ImageColumns \S+ 32x32 RGB, 5 images, group 2>", repr(cols))
    assert repr(table["x"]).startswith("<tessera.TensorRef 'x' (3, 2)")
    from tessera.torch import (
        ArrayDataset,
        DistributedGroupSampler,
        FrequencyDataset,
        TensorTableDataset,
    )

    datasets = [ArrayDataset(arr), TensorTableDataset(table.url), FrequencyDataset(cols.url)]
    for ds in datasets:
        assert re.fullmatch(r"<tessera.torch.\w+ \S+ .*\d+ (samples|images).*>", repr(ds))
        sampler = DistributedGroupSampler(ds, num_replicas=2, rank=1)
        assert re.fullmatch(r"<tessera.torch.DistributedGroupSampler rank 1 of 2, \d+ groups "
                            r"of \d+ samples, epoch 0>", repr(sampler))
    assert repr(datasets[2].sampler()).startswith("<tessera.torch.GroupShuffleSampler 5 samples")
    objects = [arr, table, table["x"], cols, arr.explain(), arr.history(), table.history(),
               cols.history()]
    for obj in objects:
        assert "\n" not in repr(obj) or isinstance(obj, (tessera.Plan, tessera.History))
        _parsed(obj._repr_html_())
    assert "<td>x</td>" in table._repr_html_()


def test_an_image_sets_notebook_view_shows_real_thumbnails(tmp_path) -> None:
    from PIL import Image

    cols = tessera.open(_kinds(tmp_path)["images"][0])
    tags = _parsed(cols._repr_html_())
    ids = cols.ids()[:3]
    ks = [1, 8, 63]
    assert len(tags.images) == len(ks) * len(ids)
    for n, src in enumerate(tags.images):
        k, image_id = ks[n // len(ids)], ids[n % len(ids)]
        shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))))
        expected = np.asarray(Image.open(io.BytesIO(base64.b64decode(
            png(cols.read([image_id], k=k)[0])))))
        assert np.array_equal(shown, expected), (k, image_id)
    assert not np.array_equal(*(np.asarray(Image.open(io.BytesIO(base64.b64decode(
        tags.images[i].split(",", 1)[1])))) for i in (0, len(ids))))  # k=1 is not k=8


def test_old_names_keep_working_with_a_warning_naming_the_new_one(tmp_path) -> None:
    kinds = _kinds(tmp_path)
    arr_url, table_url, images_url = (kinds[k][0] for k in ("array", "table", "images"))
    first = tessera.open_array(arr_url).history()[0].marker
    with pytest.warns(DeprecationWarning, match="write at="):
        old = tessera.open_array(arr_url, timestamp=first)
    with pytest.warns(DeprecationWarning, match="write at="):
        positional = tessera.open_array(arr_url, "r", first)
    assert old[:, :].tolist() == positional[:, :].tolist() == np.zeros((4, 4)).tolist()
    with pytest.warns(DeprecationWarning, match="write at="):
        assert TensorTable.open(table_url, version=1).ids() == ["x"]
    with pytest.warns(DeprecationWarning, match="write at="):
        assert TensorTable.open(table_url, "r", 1).ids() == ["x"]
    marker = tessera.open_images(images_url).history()[0].marker
    with pytest.warns(DeprecationWarning, match="write at="):
        assert len(ImageColumns.open(images_url, timestamp=marker)) == 3
    table = tessera.open_table(table_url)
    with pytest.warns(DeprecationWarning, match="write output="):
        assert table["x"].read(out="numpy").shape == (3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert table["x"].read(output="numpy").shape == (3, 2)
        tessera.open_array(arr_url, at=first)


def test_an_image_id_past_the_end_is_reported_against_the_images_that_exist(tmp_path) -> None:
    cols = tessera.open(_kinds(tmp_path)["images"][0])
    with pytest.raises(tessera.SelectionError, match=r"holds 5 image\(s\), ids 0..5"):
        cols.read([40])


def test_datasets_and_dask_sources_travel_in_time_with_at(tmp_path) -> None:
    from tessera.dask import from_images, from_tensor
    from tessera.torch import FrequencyDataset, TensorTableDataset

    kinds = _kinds(tmp_path)
    table_url, images_url = kinds["table"][0], kinds["images"][0]
    first_write = tessera.open_table(table_url).history()[1]
    assert TensorTableDataset(table_url, at=first_write.when).ids == ["x"]
    assert from_tensor(table_url, "x", at=first_write.marker).shape == (3, 2)
    with pytest.warns(DeprecationWarning, match="write at="):
        assert TensorTableDataset(table_url, version=1).ids == ["x"]
    first_append = tessera.open_images(images_url).history()[0]
    assert len(FrequencyDataset(images_url, at=first_append.when, labels=False)) == 3
    assert from_images(images_url, k=1, at=first_append.when.isoformat()).shape[0] == 3
    with pytest.warns(DeprecationWarning, match="write at="):
        assert from_images(images_url, k=1, timestamp=first_append.marker).shape[0] == 3
