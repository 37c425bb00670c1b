"""The tile codecs: every codec round-trips, and zstd (through ``zstandard``, with a context
per thread) reads the frames numcodecs wrote, refuses a wrong output size, and decodes from
many threads at once."""

from __future__ import annotations

import concurrent.futures

import numcodecs
import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import CorruptDataError
from tessera.format.blocks import decode_blocked
from tessera.format.codecs import ZstdCodec, codec_names, get_codec


@settings(max_examples=40, deadline=None)
@given(data=st.binary(min_size=1, max_size=5000), name=st.sampled_from(codec_names()))
def test_every_codec_round_trips(data: bytes, name: str) -> None:
    # (not empty: numcodecs' lz4 cannot decode the empty frame it writes; no tile is empty)
    codec = get_codec(name)
    encoded = codec.encode(data)
    assert codec.decode(encoded) == data
    out = np.empty(len(data), np.uint8)
    codec.decode_into(encoded, out)
    assert out.tobytes() == data


@pytest.mark.parametrize("level", [-7, 1, 3, 19])
def test_zstd_reads_frames_numcodecs_wrote_and_numcodecs_reads_ours(level: int) -> None:
    data = np.arange(50_000, dtype=np.int32).tobytes()
    ours = get_codec(f"zstd:{level}")
    theirs = numcodecs.Zstd(level=level)
    assert ours.decode(theirs.encode(data)) == data
    assert bytes(theirs.decode(ours.encode(data))) == data
    out = np.empty(len(data), np.uint8)
    ours.decode_into(theirs.encode(data), out)
    assert out.tobytes() == data


def test_zstd_decodes_a_frame_without_its_size_in_the_header() -> None:
    data = b"tessera " * 1000
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    codec = get_codec("zstd")
    assert codec.decode(frame) == data
    out = np.empty(len(data), np.uint8)
    codec.decode_into(frame, out)
    assert out.tobytes() == data


@pytest.mark.parametrize("size", [999, 1001])
def test_zstd_decode_into_refuses_an_output_of_another_size(size: int) -> None:
    codec = get_codec("zstd")
    frame = codec.encode(b"x" * 1000)
    with pytest.raises((ValueError, zstandard.ZstdError)):
        codec.decode_into(frame, np.empty(size, np.uint8))


def test_damaged_zstd_bytes_raise_and_a_blocked_tile_names_the_block() -> None:
    codec = get_codec("zstd")
    with pytest.raises(zstandard.ZstdError):
        codec.decode(b"not a zstd frame at all")
    from tessera.format.blocks import encode_blocked

    raw = np.arange(4096, dtype=np.int32).tobytes()
    encoded, blocks = encode_blocked(codec, raw, 4096, "crc32c")
    bad = bytearray(encoded)
    start = int(blocks.starts[2])
    bad[start:start + 8] = b"\xff" * 8
    with pytest.raises(CorruptDataError, match="block 2"):
        decode_blocked(codec, bytes(bad), blocks)


def test_zstd_decodes_from_many_threads_at_once() -> None:
    codec = ZstdCodec(3)
    rng = np.random.default_rng(0)
    payloads = [rng.integers(0, 50, 20_000, dtype=np.int32).tobytes() for _ in range(16)]
    frames = [codec.encode(p) for p in payloads]

    def work(i: int) -> bool:
        out = np.empty(len(payloads[i]), np.uint8)
        for _ in range(20):
            codec.decode(frames[i], out=out)
            if out.tobytes() != payloads[i] or codec.decode(codec.encode(payloads[i])) \
                    != payloads[i]:
                return False
        return True

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(16)))


@pytest.fixture
def bz2_registered():
    """A fifth codec registered for one test, and unregistered after it."""
    from tessera.format.codecs import registry

    before = dict(registry._REGISTRY)
    registry.register_codec(registry.CodecInfo(
        "bz2", (1, 9), 9, lambda level: numcodecs.BZ2(level=level)))
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(before)
    get_codec.cache_clear()


def test_a_registered_codec_is_usable_everywhere_codecs_are_named(bz2_registered,
                                                                  tmp_path) -> None:
    import tessera
    import tessera.h5
    from tessera.errors import SchemaError
    from tessera.format.codecs import normalize_codec_spec

    assert codec_names()[-1] == "bz2"
    assert normalize_codec_spec("BZ2:3") == "bz2:3"
    with pytest.raises(SchemaError, match=r"out of range \(1, 9\)"):
        normalize_codec_spec("bz2:10")
    data = np.arange(4096, dtype=np.int32).reshape(64, 64) % 7
    arr = tessera.from_numpy((tmp_path / "a").as_uri(), data, tile=(32, 32), codec="bz2:5")
    assert arr.schema.attrs[0].codec == "bz2:5"
    assert np.array_equal(arr[3:40, 5:9], data[3:40, 5:9])
    with tessera.h5.File((tmp_path / "f").as_uri(), "w") as f:
        dset = f.create_dataset("x", data=data, chunks=(32, 32), compression="bz2",
                                compression_opts=2)
        assert dset.array.schema.attrs[0].codec == "bz2:2"


def test_the_registry_refuses_a_taken_name_or_a_default_out_of_range() -> None:
    from tessera.errors import SchemaError
    from tessera.format.codecs import CodecInfo, register_codec

    with pytest.raises(SchemaError, match="taken"):
        register_codec(CodecInfo("zstd", (1, 2), 1, ZstdCodec))
    with pytest.raises(SchemaError, match="default level"):
        register_codec(CodecInfo("newcodec", (1, 2), 3, ZstdCodec))
    assert "newcodec" not in codec_names()


def test_the_cli_help_lists_every_registered_codec() -> None:
    from typer.testing import CliRunner

    from tessera.cli.main import app

    result = CliRunner().invoke(app, ["import", "npy", "--help"], terminal_width=200)
    for name in codec_names():
        assert name in result.output
