"""Chroma subsampling (``FrequencyFormat(chroma="4:2:0")``, tessera.images.subsampling): the
folded columns hold exactly the 4:4:4 coefficients inside the chroma corner, the fast decode
equals the reference bit for bit at every k, scale, block and size, and equals the 4:4:4
decode of the low-passed chroma within one level; image sets store it (header version 2),
read it through every path (cache, batches, crops, reduced resolution) and refuse a format
that disagrees; sets without the field read as 4:4:4."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera import open_store
from tessera.describe import images_doc
from tessera.errors import SchemaError
from tessera.images import FrequencyFormat, ImageColumns, pipeline, psnr
from tessera.images.header import SetHeader


@pytest.mark.parametrize("block", [8, 16, 32])
def test_the_folded_columns_hold_the_full_formats_coefficients_in_the_chroma_corner(
        block: int, natural: Callable[..., np.ndarray]) -> None:
    """Written independently of the layout tables: per diagonal, luma's entries, then Cb's
    and Cr's with both indices below block / 2 (i ascending), from the 4:4:4 encoding."""
    img = natural(2, (2 * block, 3 * block), seed=block)
    full = FrequencyFormat(block=block).encode(img)
    folded = FrequencyFormat(block=block, chroma="4:2:0").encode(img)
    h = block // 2
    for d, (a, b) in enumerate(zip(folded, full, strict=True)):
        rows = range(max(0, d - block + 1), min(d, block - 1) + 1)
        inside = [s for s, i in enumerate(rows) if i < h and d - i < h]
        want = np.concatenate([b[:, 0], b[:, 1][..., inside], b[:, 2][..., inside]], axis=-1)
        assert a.shape == (2, 1, 2, 3, len(rows) + 2 * len(inside)), d
        assert np.array_equal(a[:, 0], want), f"diagonal {d}"
    assert sum(c.nbytes for c in folded) * 2 == sum(c.nbytes for c in full)
    assert FrequencyFormat(block=block, chroma="4:2:0").stored(2 * block - 1) == (
        block * block + 2 * h * h)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 4), k=st.integers(1, 63),
       log_m=st.integers(0, 5), block=st.sampled_from([8, 16, 32]), floats=st.booleans(),
       blocks=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_the_fast_decode_of_subsampled_chroma_equals_the_reference(
        decoder: str, same_pixels: Callable[[np.ndarray, np.ndarray], None], seed: int,
        n: int, k: int, log_m: int, block: int, floats: bool,
        blocks: tuple[int, int]) -> None:
    """Bit for bit with numpy, within one level compiled."""
    fmt = FrequencyFormat(block=block, chroma="4:2:0")
    k = min(k, fmt.k_max)
    scale = min(1 << log_m, block) / block
    img = np.random.default_rng(seed).integers(
        0, 256, (n, block * blocks[0], block * blocks[1], 3), dtype=np.uint8)
    cols = fmt.encode(img)[:k]
    dtype = np.float32 if floats else np.uint8
    fast = fmt.decode(cols, scale=scale, output_dtype=dtype, decoder=decoder)
    assert fast.shape == (n, *(round(s * scale) for s in img.shape[1:3]), 3)
    same_pixels(fast, fmt.decode_reference(cols, scale=scale, output_dtype=dtype))


def test_it_decodes_as_the_full_format_with_the_chroma_outside_its_corner_dropped(
        natural: Callable[..., np.ndarray]) -> None:
    """Up to k = block / 2 no kept diagonal leaves the corner: the same pixels bit for bit;
    beyond, the 4:4:4 decode of the same coefficients with the chroma outside the corner
    zeroed, within one level (the planes are transformed apart, the colour after)."""
    img = natural(3, (96, 64), seed=5)
    full, sub = FrequencyFormat(), FrequencyFormat(chroma="4:2:0")
    cols_full, cols_sub = full.encode(img), sub.encode(img)
    for k in (1, 5, 16):
        for scale in (1.0, 1 / 4, 1 / 32):
            assert np.array_equal(sub.decode(cols_sub[:k], scale=scale),
                                  full.decode(cols_full[:k], scale=scale)), (k, scale)
    low = []
    for d, col in enumerate(cols_full):
        col = col.copy()
        rows = range(max(0, d - 31), min(d, 31) + 1)
        for s, i in enumerate(rows):
            if i >= 16 or d - i >= 16:
                col[:, 1:, ..., s] = 0
        low.append(col)
    for k in (17, 40, 63):
        diff = np.abs(sub.decode(cols_sub[:k]).astype(int) - full.decode(low[:k]))
        assert diff.max() <= 1, k
    quality = [psnr(img, f.decode(c)) for f, c in ((full, cols_full), (sub, cols_sub))]
    assert quality[1] > quality[0] - 1.0, quality


def test_subsampling_needs_ycbcr_and_a_known_mode() -> None:
    with pytest.raises(SchemaError, match=r"chroma must be one of .*'4:2:2'"):
        FrequencyFormat(chroma="4:2:2")
    with pytest.raises(SchemaError, match=r"needs colour='ycbcr', got colour='rgb'"):
        FrequencyFormat(colour="rgb", chroma="4:2:0")
    with pytest.raises(SchemaError, match=r"got colour='gray'"):
        FrequencyFormat(colour="gray", chroma="4:2:0")


@pytest.mark.parametrize("cache", [None, "shared"])
def test_an_image_set_stores_and_reads_subsampled_chroma(
        store_url, cache, monkeypatch, natural: Callable[..., np.ndarray]) -> None:
    url, options = store_url
    fmt = FrequencyFormat(chroma="4:2:0")
    cols = ImageColumns.create(url, size=(64, 96), group=4, fmt=fmt, storage_options=options,
                               cache=cache)
    img = natural(10, (64, 96), seed=2)
    cols.append(img)
    want = fmt.decode(fmt.encode(img))
    again = ImageColumns.open(url, storage_options=options, cache=cache)
    assert again.fmt == fmt and again.header.version == 2 and again.header.chroma == "4:2:0"
    assert "64x96 RGB 4:2:0, 10 images" in repr(again)
    assert images_doc(url, again)["chroma"] == "4:2:0"  # tessera info and the viewer
    for handle in (cols, again):
        assert np.array_equal(handle.read([7, 1], k=63), want[[7, 1]])
        assert np.array_equal(handle.read([2], k=20, crop=(32, 64, 32, 96)),
                              fmt.decode(fmt.encode(img[[2]])[:20])[:, 32:64, 32:96])
        assert np.array_equal(handle.read([3], k=63, scale=0.5),
                              fmt.decode(fmt.encode(img[[3]]), scale=0.5))
        coefficients = handle.read([0, 9], k=8, output="coefficients")
        assert coefficients.shape == (2, 1, 2, 3, fmt.stored(8))
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 1)  # the batched path: a batch per group
    assert np.array_equal(ImageColumns.open(url, storage_options=options, cache=None).read(
        list(range(10)), k=63), want)
    with pytest.raises(SchemaError, match=r"stores chroma='4:2:0'.*has '4:4:4'"):
        ImageColumns.open(url, storage_options=options, fmt=FrequencyFormat())


def test_headers_without_chroma_read_as_full_and_subsampled_ones_need_version_2() -> None:
    full = SetHeader.new(size=(64, 64), channels=3, colour="ycbcr", block=32, q=50, group=8,
                         codec="zstd", fit="error", crop_tile=None)
    assert full.version == 1  # every earlier reader reads these as stored
    doc = json.loads(full.to_json())
    del doc["chroma"]
    assert SetHeader.from_json(json.dumps(doc).encode(), "memory://h").chroma == "4:4:4"
    sub = SetHeader.new(size=(64, 64), channels=3, colour="ycbcr", block=32, q=50, group=8,
                        codec="zstd", fit="error", crop_tile=None, chroma="4:2:0")
    assert sub.version == 2
    assert SetHeader.from_json(sub.to_json(), "memory://h") == sub
    with pytest.raises(SchemaError, match="field 'chroma' has the wrong type"):
        SetHeader.from_json(json.dumps(dict(doc, chroma=420)).encode(), "memory://h")


def test_a_set_with_an_unknown_chroma_mode_is_refused_naming_it(tmp_path) -> None:
    url = (tmp_path / "s").as_uri()
    ImageColumns.create(url, size=(32, 32), fmt=FrequencyFormat(chroma="4:2:0"))
    store = open_store(url)
    header = json.loads(bytes(store.get("__images.json")))
    store.put("__images.json", json.dumps(dict(header, chroma="4:1:1")).encode())
    with pytest.raises(SchemaError, match="'4:1:1'"):
        ImageColumns.open(url)


def test_int16_coefficients_and_crop_tiles_take_subsampled_chroma_too(
        tmp_path, same_pixels: Callable[[np.ndarray, np.ndarray], None],
        decoder: str, natural: Callable[..., np.ndarray]) -> None:
    """Below q = 33 the columns are int16; with crop tiles a crop fetches only its tiles."""
    fmt = FrequencyFormat(q=12, chroma="4:2:0")
    img = natural(3, (64, 96), seed=9)
    cols = fmt.encode(img)
    assert cols[0].dtype == np.int16 and cols[20].shape == (3, 1, 2, 3, fmt.width(20))
    for k in (9, 40, 63):
        same_pixels(fmt.decode(cols[:k], decoder=decoder), fmt.decode_reference(cols[:k]))
    url = (tmp_path / "tiled").as_uri()
    tiled = ImageColumns.create(url, size=(64, 96), fmt=fmt, crop_tile=(1, 1), cache=None)
    tiled.append(img)
    got = tiled.read([1, 2], k=63, crop=(32, 64, 0, 32))
    assert np.array_equal(got, fmt.decode(cols)[[1, 2], 32:64, 0:32])
    assert len(tiled.last_read.tile_reads) == 63  # one block's tile of each diagonal
