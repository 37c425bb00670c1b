"""Image columns on the array engine (tessera.images.columns): coefficients bit for bit, one
request per group for Sf_k with exactly its tiles' bytes, reduced resolution, labels and
holes, exact bytes per k, concurrent appenders, and the errors of bad input, on memory,
folder and S3 stores."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tessera.errors import (
    ArrayExistsError,
    ArrayNotFoundError,
    InvalidArgumentError,
    InvalidTypeError,
    ReadOnlyError,
    SchemaError,
    SelectionError,
)
from tessera.images import ColumnCache, FrequencyFormat, ImageColumns, shared_cache
from tessera.query.cost import DEFAULT_PROFILES

APPENDER = """
import sys, numpy as np
from tessera.images import ImageColumns
url, who = sys.argv[1], int(sys.argv[2])
cols = ImageColumns.open(url, mode="w")
for i in range(3):
    images = np.full((5, 64, 64, 3), who * 10 + i, np.uint8)
    ids = cols.append(images, labels=[who * 10 + i] * 5)
    print("ids", who, i, " ".join(map(str, ids)))
"""


def _images(n: int, seed: int = 0, size: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = np.stack([np.stack([rng.uniform(0, 255) * (a * yy + (1 - a) * xx)
                              for a in rng.uniform(0, 1, 3)], -1) for _ in range(n)])
    return np.clip(out + rng.normal(0, 4, out.shape), 0, 255).astype(np.uint8)


@pytest.fixture
def columns(store_url):
    url, options = store_url
    cols = ImageColumns.create(url, size=(64, 64), group=4, storage_options=options,
                               cache=None)  # every read fetches: requests are counted
    images = _images(10)
    cols.append(images, labels=list(range(10)))
    return cols, images, url, options


def test_coefficients_and_pixels_round_trip(columns) -> None:
    _, images, url, options = columns
    fmt = FrequencyFormat()
    reference = fmt.encode(images)
    reader = ImageColumns.open(url, storage_options=options)
    rng = np.random.default_rng(1)
    for k in (1, 3, 8, 63):
        ids = rng.choice(10, size=4, replace=False)
        got = reader.read(ids, k=k, output="coefficients")
        want = np.concatenate([c[ids] for c in reference[:k]], axis=-1)
        assert got.dtype == np.int8 and np.array_equal(got, want)
        pixels = reader.read(ids, k=k)
        assert np.array_equal(pixels, fmt.decode([c[ids] for c in reference[:k]]))
    assert len(reader) == 10 and reader.ids().tolist() == list(range(10))
    assert reader.labels([9, 0, 4]).tolist() == [9, 0, 4]


def test_sf_k_of_a_group_is_one_request_of_exactly_its_tiles(columns) -> None:
    cols, _, _, _ = columns
    cols.coeffs.profile = DEFAULT_PROFILES["cloud"]
    group = [4, 5, 6, 7]  # the second group, whole
    for k in (1, 8, 20):
        cols.read(group, k=k, output="coefficients")
        stats = cols.last_read.stats
        data = [m for m in ("get", "range") if m in stats.by_method]
        assert sum(stats.by_method[m].requests for m in data) == 1
        tiles = [r for r in cols.last_read.tile_reads]
        assert len(tiles) == k and sum(stats.by_method[m].bytes_received for m in data) == sum(
            r.length for r in tiles)
        assert cols.explain(group, k=k).totals.nbytes == sum(r.length for r in tiles)


def test_reduced_resolution_and_bytes_per_k(columns) -> None:
    cols, images, _, _ = columns
    small = cols.read([0, 1], k=1, scale=1 / 32)
    means = images[:2].reshape(2, 2, 32, 2, 32, 3).mean(axis=(2, 4))
    assert small.shape == (2, 2, 2, 3) and np.abs(small - means).max() <= 3
    per_k = cols.bytes_per_k()
    assert len(per_k) == 63 and np.all(np.diff(per_k) >= 0)
    assert per_k[-1] == sum(cols.coeffs.stored_bytes().values())


def test_appends_fill_whole_groups_and_holes_are_not_images(columns) -> None:
    cols, _, _, _ = columns
    ids = cols.append(_images(3, seed=5))
    assert ids.tolist() == [12, 13, 14]  # 10 images took 3 groups of 4 (ids 10, 11: holes)
    assert len(cols) == 13 and 10 not in cols.ids().tolist()
    assert cols.labels([12]).tolist() == [-1]
    with pytest.raises(SelectionError, match="image id 10 is a hole"):
        cols.read([10], k=1)


def test_bad_input_gets_an_error_that_says_what_to_do(store_url) -> None:
    url, options = store_url
    with pytest.raises(SchemaError, match="try 96"):
        ImageColumns.create(url, size=(70, 64), storage_options=options)
    with pytest.raises(ArrayNotFoundError, match=r"ImageColumns\.create"):
        ImageColumns.open(url, storage_options=options)
    cols = ImageColumns.create(url, size=(64, 64), group=2, storage_options=options)
    with pytest.raises(ArrayExistsError, match=r"ImageColumns\.open"):
        ImageColumns.create(url, size=(64, 64), storage_options=options)
    with pytest.raises(InvalidArgumentError, match=r"astype\(np.uint8\)"):
        cols.append(np.zeros((1, 64, 64, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match="CHW"):
        cols.append(np.zeros((1, 3, 64, 64), np.uint8))
    with pytest.raises(InvalidArgumentError, match=r"image 1 is 32x64.*fit='error'"):
        cols.append([np.zeros((64, 64, 3), np.uint8), np.zeros((32, 64, 3), np.uint8)])
    with pytest.raises(InvalidArgumentError, match="no images"):
        cols.append([])
    with pytest.raises(InvalidArgumentError, match="2 integers"):
        cols.append(np.zeros((2, 64, 64, 3), np.uint8), labels=[1])
    cols.append(np.zeros((2, 64, 64, 3), np.uint8))
    with pytest.raises(InvalidTypeError, match="k must be an int"):
        cols.read([0], k=2.5)
    with pytest.raises(InvalidArgumentError, match=r"k must be 1\.\.63"):
        cols.read([0], k=0)
    with pytest.raises(InvalidArgumentError, match="scale must be one of"):
        cols.read([0], k=4, scale=1 / 3)
    with pytest.raises(SelectionError, match="image id 7 does not exist"):
        cols.read([7], k=1)
    with pytest.raises(SelectionError, match="image id -1"):
        cols.read([-1], k=1)
    with pytest.raises(ReadOnlyError):
        ImageColumns.open(url, storage_options=options).append(np.zeros((1, 64, 64, 3),
                                                                        np.uint8))


def test_four_concurrent_appenders_get_disjoint_ids(tmp_path) -> None:
    url = (tmp_path / "images").as_uri()
    ImageColumns.create(url, size=(64, 64), group=4)
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, url, str(w)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(4)]
    seen: dict[int, int] = {}
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        for line in out.splitlines():
            _, who, i, *ids = line.split()
            for image_id in map(int, ids):
                assert image_id not in seen
                seen[image_id] = int(who) * 10 + int(i)
    cols = ImageColumns.open(url)
    assert len(cols) == len(seen) == 60
    ids = sorted(seen)
    assert cols.labels(ids).tolist() == [seen[i] for i in ids]
    firsts = cols.read(ids, k=1, scale=1 / 32)[:, 0, 0, 0]
    assert np.abs(firsts.astype(int) - [seen[i] for i in ids]).max() <= 3


def test_a_rising_k_fetches_only_the_new_diagonals(columns) -> None:
    cols, images, _, _ = columns
    cols.cache = ColumnCache(64 << 20)
    fmt = FrequencyFormat()
    reference = fmt.encode(images)
    ids = [1, 2, 5]  # groups 0 and 1
    first = cols.read(ids, k=4, output="coefficients")
    assert {r.attr for r in cols.last_read.tile_reads} == {"d00", "d01", "d02", "d03"}
    second = cols.read(ids, k=8, output="coefficients")
    fetched = cols.last_read.tile_reads
    assert {r.attr for r in fetched} == {f"d{d:02d}" for d in range(4, 8)}
    assert len(fetched) == 4 * 2  # the new diagonals of the two groups, nothing else
    assert np.array_equal(first, np.concatenate([c[ids] for c in reference[:4]], axis=-1))
    assert np.array_equal(second, np.concatenate([c[ids] for c in reference[:8]], axis=-1))
    last = cols.last_read
    cols.read([0, 6], k=8)  # another reader of the same groups: nothing fetched
    assert cols.last_read is last
    cols.cache = ColumnCache(1)  # a tiny budget still answers right
    assert np.array_equal(cols.read([9], k=3, output="coefficients"),
                          np.concatenate([c[[9]] for c in reference[:3]], axis=-1))


def test_choose_k_by_budget_and_by_quality(columns) -> None:
    cols, _, _, _ = columns
    per_image = cols.bytes_per_k() / len(cols)
    k = cols.choose_k(budget_bytes_per_image=float(per_image[9]))
    assert k >= 10 and per_image[k - 1] <= per_image[9]
    with pytest.raises(InvalidArgumentError, match="k = 1 takes"):
        cols.choose_k(budget_bytes_per_image=1)
    fmt = FrequencyFormat()
    chosen = cols.choose_k(min_psnr=30.0, sample=4)
    sample = cols.ids()[np.linspace(0, len(cols) - 1, 4).astype(int)]
    best = cols.read(sample, k=63)
    from tessera.images import psnr

    assert psnr(best, cols.read(sample, k=chosen)) >= 30.0
    if chosen > 1:
        assert psnr(best, cols.read(sample, k=chosen - 1)) < 30.0
    assert fmt.k_max == 63
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        cols.choose_k()


def test_resize_fit_and_pil_and_path_inputs(tmp_path) -> None:
    from PIL import Image

    cols = ImageColumns.create((tmp_path / "r").as_uri(), size=(64, 64), group=2, fit="resize")
    wide = np.zeros((80, 160, 3), np.uint8)
    wide[:, 40:120] = 200  # the centre, kept by the crop
    path = tmp_path / "wide.png"
    Image.fromarray(wide).save(path)
    rgba = Image.fromarray(np.full((64, 64, 4), 100, np.uint8), "RGBA")
    ids = cols.append([wide, str(path), rgba])
    assert ids.tolist() == [0, 1, 2]
    got = cols.read(ids, k="all")
    assert got.shape == (3, 64, 64, 3)
    assert abs(int(got[0, 32, 32, 0]) - 200) <= 3 and abs(int(got[1, 32, 32, 0]) - 200) <= 3
    assert abs(int(got[2, 10, 10, 0]) - 100) <= 3
    with pytest.raises(InvalidArgumentError, match="cannot be read"):
        cols.append([str(tmp_path / "missing.png")])
    with pytest.raises(SchemaError, match="fit must be one of"):
        ImageColumns.create((tmp_path / "p").as_uri(), size=(64, 64), fit="stretch")


def test_pad_fit_keeps_true_sizes_and_trim_cuts_them_back(store_url) -> None:
    url, options = store_url
    cols = ImageColumns.create(url, size=(64, 64), group=2, fit="pad", storage_options=options)
    small = _images(1, seed=3, size=64)[0, :40, :50]
    ids = cols.append([small, _images(1, seed=4)[0]])
    assert cols.sizes(ids).tolist() == [[40, 50], [64, 64]]
    canvas = cols.read(ids[:1], k="all")[0]
    reference = FrequencyFormat().decode(FrequencyFormat().encode(
        np.pad(small, ((0, 24), (0, 14), (0, 0)), mode="edge")[None]))[0]
    assert np.array_equal(canvas, reference)  # edge-replicated, not zero-padded
    trimmed = cols.read(ids, k="all", trim=True)
    assert [t.shape for t in trimmed] == [(40, 50, 3), (64, 64, 3)]
    assert np.array_equal(trimmed[0], canvas[:40, :50])
    half = cols.read(ids, k=8, scale=1 / 2, trim=True)
    assert [t.shape for t in half] == [(20, 25, 3), (32, 32, 3)]
    with pytest.raises(InvalidArgumentError, match=r"larger than the set's 64x64.*'resize'"):
        cols.append([np.zeros((65, 10, 3), np.uint8)])
    with pytest.raises(InvalidArgumentError, match="trim=True"):
        cols.read(ids, k=1, output="coefficients", trim=True)


def test_crops_decode_and_return_exactly_their_pixels(columns) -> None:
    cols, _, _, _ = columns
    ids = [0, 5, 9]
    whole = cols.read(ids, k=20)
    got = cols.read(ids, k=20, crop=(5, 40, 33, 64))
    assert np.array_equal(got, whole[:, 5:40, 33:64])
    quarter = cols.read(ids, k=20, scale=1 / 4)
    assert np.array_equal(cols.read(ids, k=20, scale=1 / 4, crop=(4, 40, 32, 64)),
                          quarter[:, 1:10, 8:16])
    coeffs = cols.read(ids, k=6, output="coefficients")
    assert np.array_equal(cols.read(ids, k=6, output="coefficients", crop=(32, 64, 0, 64)),
                          coeffs[:, :, 1:2])
    with pytest.raises(SelectionError, match="empty or outside"):
        cols.read(ids, k=2, crop=(10, 10, 0, 5))
    with pytest.raises(SelectionError, match="empty or outside"):
        cols.read(ids, k=2, crop=(0, 65, 0, 5))
    with pytest.raises(InvalidArgumentError, match="block-aligned"):
        cols.read(ids, k=2, output="coefficients", crop=(0, 16, 0, 32))
    with pytest.raises(InvalidArgumentError, match="multiples of 4"):
        cols.read(ids, k=2, scale=1 / 4, crop=(1, 16, 0, 32))
    with pytest.raises(SelectionError, match=r"\(y0, y1, x0, x1\)"):
        cols.read(ids, k=2, crop=(0, 16))


def test_crop_tiles_fetch_only_the_tiles_under_a_crop(store_url) -> None:
    url, options = store_url
    cols = ImageColumns.create(url, size=(64, 128), group=2, crop_tile=(1, 2),
                               storage_options=options, cache=None)
    images = _images(2, seed=7, size=128)[:, :64]
    cols.append(np.ascontiguousarray(images))
    assert np.array_equal(cols.read([0, 1], k=8, crop=(0, 32, 64, 128)),
                          cols.read([0, 1], k=8)[:, :32, 64:])
    tiles = cols.last_read.tile_reads
    cols.read([0, 1], k=8, crop=(0, 32, 64, 128))
    assert len(cols.last_read.tile_reads) * 4 == len(tiles)  # 1 of the 4 tiles per diagonal
    with pytest.raises(SchemaError, match="crop_tile"):
        ImageColumns.create(url + "-x", size=(64, 64), crop_tile=(3, 1),
                            storage_options=options)


def test_the_shared_cache_serves_every_handle_of_a_set_and_no_other(tmp_path) -> None:
    url = (tmp_path / "s").as_uri()
    cache = ColumnCache(64 << 20)
    ImageColumns.create(url, size=(64, 64), group=4, cache=None).append(_images(8))
    first = ImageColumns.open(url, cache=cache)
    second = ImageColumns.open(url, cache=cache)
    a = first.read([1, 6], k=8)
    assert first.last_read.tile_reads
    hits = cache.hits
    assert np.array_equal(second.read([0, 2, 5], k=4), first.read([0, 2, 5], k=4))
    assert second.last_read is None and cache.hits > hits  # nothing fetched
    other = (tmp_path / "t").as_uri()  # another set: its own entries (keyed by uid)
    ImageColumns.create(other, size=(64, 64), group=4, cache=None).append(_images(8, seed=9))
    b = ImageColumns.open(other, cache=cache).read([1, 6], k=8)
    assert not np.array_equal(a, b)
    assert ImageColumns.open(url).cache is shared_cache()
    with pytest.raises(InvalidArgumentError, match="cache must be"):
        ImageColumns.open(url, cache="private")


def test_the_writer_streams_appends_in_flushes(tmp_path) -> None:
    url = (tmp_path / "w").as_uri()
    cols = ImageColumns.create(url, size=(64, 64), group=4)
    images = _images(11)
    with cols.writer(flush_images=5) as w:
        w.append(images[:3], labels=[0, 1, 2])
        assert len(w.ids) == 0  # waiting
        w.append(list(images[3:6]))  # 6 waiting: one append
        assert w.ids.tolist() == [0, 1, 2, 3, 4, 5]
        w.append(images[6:], labels=[6, 7, 8, 9, 10])
    assert w.ids.tolist() == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12]
    assert len(cols.coeffs.fragments) == 2
    assert cols.labels(w.ids).tolist() == [0, 1, 2, -1, -1, -1, 6, 7, 8, 9, 10]
    assert np.array_equal(cols.read(w.ids, k="all", output="coefficients"),
                          np.concatenate(FrequencyFormat().encode(images), axis=-1))
    with pytest.raises(RuntimeError), cols.writer() as w2:  # images before an error are kept
        w2.append(images[:2])
        raise RuntimeError("source failed")
    assert len(cols) == 13
    with pytest.raises(InvalidArgumentError, match="flush_images"):
        cols.writer(flush_images=0)


def test_classes_and_format_checks_on_open(tmp_path) -> None:
    url = (tmp_path / "c").as_uri()
    cols = ImageColumns.create(url, size=(64, 64))
    assert cols.classes() is None
    cols.set_classes(["cat", "dog"])
    assert ImageColumns.open(url).classes() == ["cat", "dog"]
    with pytest.raises(InvalidArgumentError, match="list of strings"):
        cols.set_classes("cat")
    with pytest.raises(SchemaError, match=r"stores q=50.*has 20"):
        ImageColumns.open(url, fmt=FrequencyFormat(q=20))
    with pytest.raises(InvalidArgumentError, match=r"-1 \(none\)"):
        cols.append(_images(1), labels=[-5])
    import json

    from tessera import open_store

    store = open_store(url)
    header = json.loads(bytes(store.get("__images.json")))
    store.put("__images.json", json.dumps(dict(header, version=99)).encode())
    with pytest.raises(SchemaError, match=r"header version 99, newer .* upgrade"):
        ImageColumns.open(url)
    store.put("__images.json", b'{"format": "something else"}')
    with pytest.raises(SchemaError, match="not an image-set header"):
        ImageColumns.open(url)
    store.put("__images.json", b"{not json")
    with pytest.raises(SchemaError, match="not valid JSON"):
        ImageColumns.open(url)


def test_reduced_output_fetches_only_the_diagonals_that_reach_it(columns) -> None:
    cols, _, _, _ = columns
    full = cols.read([0, 5], k=63, scale=1 / 32)
    assert {r.attr for r in cols.last_read.tile_reads} == {"d00"}  # 2m - 1 = 1 diagonal
    assert np.array_equal(full, cols.read([0, 5], k=1, scale=1 / 32))
    cols.read([0, 5], k=20, scale=1 / 4)  # 8 x 8 of 32 x 32: diagonals 0..14 reach it
    assert {r.attr for r in cols.last_read.tile_reads} == {f"d{d:02d}" for d in range(15)}
    assert cols.fetched_k(20, scale=1 / 4) == 15 and cols.fetched_k(10, scale=1 / 4) == 10
    assert len(cols.explain([0, 5], k=20, scale=1 / 4).choices) == 15 * 2  # two groups
    assert len(cols.explain([0, 5], k=20, output="coefficients").choices) == 20 * 2


def test_a_damaged_column_chunk_names_its_images(tmp_path) -> None:
    from tessera.errors import CorruptDataError

    url = (tmp_path / "s").as_uri()
    cols = ImageColumns.create(url, size=(64, 64), group=4, cache=None)
    cols.append(_images(8))
    data = next((tmp_path / "s" / "coeffs" / "__fragments").iterdir()) / "__tiles.data"
    raw = bytearray(data.read_bytes())
    raw[-3] ^= 0xFF  # inside group 1's tiles (the last of the fragment)
    data.write_bytes(bytes(raw))
    with pytest.raises(CorruptDataError, match=r"attribute 'd62'.*images 4\.\.7, group 1") \
            as caught:
        ImageColumns.open(url, cache=None).read(list(range(8)), k="all")
    assert caught.value.attr == "d62" and caught.value.tile is not None
    assert caught.value.tile[0] == 1 and caught.value.key is not None
    # group 0 is intact and still reads
    assert ImageColumns.open(url, cache=None).read([0, 1], k="all").shape == (2, 64, 64, 3)


def test_large_pixel_reads_fetch_and_decode_in_batches_of_whole_groups(columns, monkeypatch,
                                                                        ) -> None:
    """A read of many groups is fetched in batches, each decoded while the next is fetched:
    the pixels are those of one read and one decode whatever the order of the ids, their
    repeats, the scale or a crop; every group's tiles are fetched once."""
    import tessera.images.pipeline as pipeline

    cols, _, url, options = columns
    ids = [9, 0, 4, 1, 8, 5, 0, 2]  # groups 2, 0, 1, 0, 2, 1, 0, 0 (group = 4)
    whole = {(k, s, c): cols.read(ids, k=k, scale=s, crop=c)
             for k, s, c in [(63, 1.0, None), (8, 1.0, None), (20, 0.25, None),
                             (63, 1.0, (8, 40, 0, 64))]}
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 1)  # one group per batch
    reads: list[list[int]] = []
    read_columns = cols.read_columns

    def counted(chosen, first, k, blocks=(slice(None), slice(None))):
        reads.append(list(chosen))
        return read_columns(chosen, first, k, blocks)

    monkeypatch.setattr(cols, "read_columns", counted)
    for (k, s, c), want in whole.items():
        reads.clear()
        assert np.array_equal(cols.read(ids, k=k, scale=s, crop=c), want)
        assert [sorted(set(r)) for r in reads] == [[0, 1, 2], [4, 5], [8, 9]]
    # last_read tells of the whole read: every batch's tiles and requests, each batch's plan
    monkeypatch.setattr(cols, "read_columns", read_columns)
    cols.read(ids, k=8)
    report = cols.last_read
    assert len(report.parts) == 3 and report.plan is None
    assert len(report.tile_reads) == 3 * 8  # 3 groups x 8 diagonals
    assert report.stats.requests == sum(p.stats.requests for p in report.parts)
    assert all(p.plan is not None for p in report.parts)
    cols.read([0], k=8)  # a read of one batch: the array's own report again
    assert cols.last_read.parts == [] and cols.last_read.plan is not None
    # ids in group order: each batch is decoded straight into its place in the output
    in_order = list(range(10))
    assert np.array_equal(cols.read(in_order, k=63),
                          np.concatenate([cols.read([i], k=63) for i in in_order]))
    one_image = cols._coefficient_bytes(63, (slice(None), slice(None)))
    assert one_image == 3 * 2 * 2 * 1024  # int8 coefficients of 2 x 2 blocks, 3 channels
    gray = ImageColumns.create(f"{url.rstrip('/')}-gray", size=(64, 64), group=4,
                               fmt=FrequencyFormat(colour="gray"), storage_options=options,
                               cache=None)
    assert gray._coefficient_bytes(63, (slice(None), slice(None))) == 1 * 2 * 2 * 1024
    assert pipeline.read_decoded(cols.fmt, counted, np.arange(3), 4, 63, 32,
                                 one_image) is None  # one group: one read, one decode


def test_a_damaged_tile_in_a_later_batch_names_its_images(tmp_path, monkeypatch) -> None:
    import tessera.images.pipeline as pipeline
    from tessera.errors import CorruptDataError

    url = (tmp_path / "s").as_uri()
    cols = ImageColumns.create(url, size=(64, 64), group=4, cache=None)
    cols.append(_images(8))
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 1)  # a batch per group
    data = next((tmp_path / "s" / "coeffs" / "__fragments").iterdir()) / "__tiles.data"
    raw = bytearray(data.read_bytes())
    raw[-3] ^= 0xFF  # inside group 1's tiles
    data.write_bytes(bytes(raw))
    with pytest.raises(CorruptDataError, match=r"images 4\.\.7, group 1"):
        ImageColumns.open(url, cache=None).read(list(range(8)), k="all")
