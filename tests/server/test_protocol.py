"""The pushdown wire format: round trips, every validation rule, and a fuzz test of the
request decoder (anything but a ProtocolError is a bug)."""

from __future__ import annotations

import contextlib
import json
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.format.tile import Piece
from tessera.pushdown.framing import (
    ForbiddenKeyError,
    ItemError,
    LimitError,
    Limits,
    ProtocolError,
    decode_response,
    encode_response,
)
from tessera.pushdown.read_items import (
    CellAttr,
    CellBox,
    CellsItem,
    Index,
    Slice,
    TileItem,
    dim_select,
    encode_read_request,
    parse_read_request,
)


def tile(**kw: Any) -> dict[str, Any]:
    base = TileItem("arr", "__fragments/f/a.data", 0, 64, None, 0, "<i4", (), (4, 4),
                    "row-major", (Slice(0, 4, 1), Index((3, 1, 1)))).to_json()
    base.update(kw)
    return base


def body(*items: dict[str, Any], protocol: int = 1) -> bytes:
    return json.dumps({"protocol": protocol, "reads": list(items)}).encode()


def test_round_trip_of_tile_and_cells_items() -> None:
    t = TileItem("a/b", "k", 16, 64, "zstd", 7, "<f8", (3,), (2, 4), "col-major",
                 (Slice(0, 2, 1), Index((3, 0))))
    c = CellsItem("s", Piece("c", 0, 16, None, 1), "<i8", 2,
                  (("v", CellAttr(Piece("v", 0, 8, "lz4", 2), "<f4", ())),),
                  CellBox((0, 0.5), (10, 20), (True, False), (None, (1, 2, 3))))
    assert parse_read_request(encode_read_request([t, c]), Limits()).items == [t, c]


@pytest.mark.parametrize("positions, expected", [
    ([3], Slice(3, 4, 1)), ([0, 1, 2], Slice(0, 3, 1)), ([1, 4, 7], Slice(1, 8, 3)),
    ([2, 1], Index((2, 1))), ([1, 1], Index((1, 1))), ([0, 1, 3], Index((0, 1, 3)))])
def test_dim_select_is_compact_and_exact(positions: list[int], expected: Any) -> None:
    got = dim_select(np.array(positions))
    assert got == expected
    assert np.arange(10)[got.as_index()].tolist() == positions


@pytest.mark.parametrize("change, error, match", [
    ({"key": "../x"}, ForbiddenKeyError, r"'\.\.'"),
    ({"key": "/etc/passwd"}, ForbiddenKeyError, "absolute"),
    ({"key": "s3://other-bucket/x"}, ForbiddenKeyError, "':'"),
    ({"key": "a/%2e%2e/b"}, ForbiddenKeyError, "'%'"),
    ({"key": "a\\..\\b"}, ForbiddenKeyError, "backslash"),
    ({"array": "../../etc"}, ForbiddenKeyError, r"'\.\.'"),
    ({"array": "http://evil/x"}, ForbiddenKeyError, "':'"),
    ({"key": 5}, ProtocolError, "key must be a string"),
    ({"offset": -1}, ProtocolError, "offset"),
    ({"length": 63}, ProtocolError, "has 64 bytes, not 63"),
    ({"crc32": 1 << 32}, ProtocolError, "crc32"),
    ({"codec": "pickle"}, ProtocolError, "unknown codec"),
    ({"dtype": "O"}, ProtocolError, "dtype"),
    ({"dtype": ">i4"}, ProtocolError, "little-endian"),
    ({"tile_shape": [4, 0]}, ProtocolError, "tile_shape"),
    ({"cell_order": "diagonal"}, ProtocolError, "cell_order"),
    ({"select": [[0, 5, 1], [0, 1, 1]]}, ProtocolError, r"not inside \[0, 4\)"),
    ({"select": [[0, 4, 0], [0, 1, 1]]}, ProtocolError, "step"),
    ({"select": [{"index": [4]}, [0, 1, 1]]}, ProtocolError, "outside"),
    ({"select": [[0, 4, 1]]}, ProtocolError, "one entry per tile dimension"),
    ({"kind": "exec"}, ProtocolError, "kind"),
])
def test_each_rule_of_a_tile_item(change: dict[str, Any], error: type[Exception],
                                  match: str) -> None:
    with pytest.raises(error, match=match):
        parse_read_request(body(tile(**change)), Limits())


def test_request_level_rules() -> None:
    with pytest.raises(ProtocolError, match="not valid JSON"):
        parse_read_request(b"{", Limits())
    with pytest.raises(ProtocolError, match="NaN"):
        parse_read_request(b'{"protocol": NaN}', Limits())
    with pytest.raises(ProtocolError, match="unsupported protocol 2"):
        parse_read_request(body(tile(), protocol=2), Limits())
    with pytest.raises(ProtocolError, match="non-empty list"):
        parse_read_request(body(), Limits())
    with pytest.raises(LimitError, match="exceeds the limit"):
        parse_read_request(body(tile()), Limits(max_body_bytes=10))
    with pytest.raises(LimitError, match="3 reads in one request; the limit is 2"):
        parse_read_request(body(tile(), tile(), tile()), Limits(max_items=2))
    with pytest.raises(LimitError, match="selects 96 bytes"):  # 2 x 4 x 3 cells x 4 bytes
        parse_read_request(body(tile(), tile()), Limits(max_output_bytes=95))
    with pytest.raises(LimitError, match="tile of 64 bytes"):
        parse_read_request(body(tile(length=32, codec="zstd")), Limits(max_tile_bytes=48))


def test_response_round_trip_keeps_errors_in_place() -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = np.arange(3.0).astype(">f8")  # big-endian in, little-endian on the wire
    chunks = encode_response([{"cells": a}, ItemError(422, "damaged"), {"x": b}], 0.25)
    out = decode_response(b"".join(bytes(c) for c in chunks), 3)
    assert out.server_s == 0.25
    assert np.array_equal(out.results[0]["cells"], a)  # type: ignore[index]
    assert out.results[1] == ItemError(422, "damaged")
    got = out.results[2]["x"]  # type: ignore[index]
    assert got.dtype == np.dtype("<f8") and got.tolist() == [0.0, 1.0, 2.0]


def test_malformed_responses_are_protocol_errors() -> None:
    good = b"".join(bytes(c) for c in encode_response([{"c": np.zeros(4, np.int32)}], 0.0))
    with pytest.raises(ProtocolError, match="shorter"):
        decode_response(good[:5], 1)
    with pytest.raises(ProtocolError, match="not a pushdown response"):
        decode_response(b"HTTP" + good[4:], 1)
    with pytest.raises(ProtocolError, match=r"2 results expected"):
        decode_response(good, 2)
    with pytest.raises(ProtocolError, match="does not fit"):
        decode_response(good[:-1], 1)
    header = json.dumps({"results": [{"ok": True, "buffers": [
        {"name": "c", "dtype": "O", "shape": [1], "offset": 0, "nbytes": 8}]}]}).encode()
    with pytest.raises(ProtocolError, match="dtype"):
        decode_response(struct.pack("<4sII", b"TSPD", 1, len(header)) + header + bytes(8), 1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_fuzz_arbitrary_bodies_only_raise_protocol_errors(raw: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        parse_read_request(raw, Limits())


field_values = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40),
                         st.text(max_size=12), st.lists(st.integers(-3, 9), max_size=4),
                         st.lists(st.lists(st.integers(-3, 9), max_size=4), max_size=3),
                         st.dictionaries(st.sampled_from(["index", "x"]),
                                         st.lists(st.integers(-3, 9), max_size=4), max_size=2))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(tile())), field_values, max_size=4))
def test_fuzz_mutated_tile_items_only_raise_protocol_errors(changes: dict[str, Any]) -> None:
    try:
        items = parse_read_request(body(tile(**changes)), Limits()).items
    except ProtocolError:
        return
    item = items[0]
    assert isinstance(item, TileItem)
    # Whatever passed is safe to act on: the selection lies inside the tile.
    for sel, n in zip(item.select, item.tile_shape, strict=True):
        positions = np.arange(n)[sel.as_index()]
        assert len(positions) == len(sel) > 0
