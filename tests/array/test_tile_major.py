"""Tile-major arrays (``ArraySchema(attr_layout="tile-major")``): a dense fragment keeps every
attribute's tile of a space tile side by side in one object, so reading several attributes
of a tile is one request; everything else (values, checksums, blocks, consolidation, time
travel, pushdown items) is as for attribute-major arrays. The dense model test draws both
layouts on every store."""

from __future__ import annotations

import numpy as np
import pytest

import tessera
from tessera.errors import SchemaError
from tessera.query.cost import DEFAULT_PROFILES


def _schema(layout: str, n_attrs: int = 8, codec: str | None = "zstd") -> tessera.ArraySchema:
    return tessera.ArraySchema([tessera.Dim("n", (0, 63), 32), tessera.Dim("x", (0, 15), 16)],
                               [tessera.Attr(f"d{i:02d}", "i1", codec=codec)
                                for i in range(n_attrs)], attr_layout=layout)


def _values(schema: tessera.ArraySchema, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {a.name: rng.integers(-5, 5, (64, 16)).astype(np.int8) for a in schema.attrs}


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_k_attributes_of_a_tile_are_one_request(store_url, codec) -> None:
    url, options = store_url
    requests = {}
    for layout in ("attr-major", "tile-major"):
        schema = _schema(layout, codec=codec)
        arr = tessera.create_array(f"{url}-{layout}", schema, storage_options=options)
        values = _values(schema)
        arr.write(values)
        arr.profile = DEFAULT_PROFILES["cloud"]
        first = [f"d{i:02d}" for i in range(5)]
        got = arr.read((slice(0, 32), slice(None)), attrs=first)
        assert all(np.array_equal(got[n], values[n][:32]) for n in first)
        stats = arr.last_read.stats
        requests[layout] = sum(stats.by_method[m].requests for m in ("get", "range")
                               if m in stats.by_method)
        keys = {o.key.rsplit("/", 1)[1] for o in arr.store.list("__fragments/")}
        assert keys == ({"__meta.json", "__tiles.data"} if layout == "tile-major"
                        else {"__meta.json", *(f"d{i:02d}.data" for i in range(8))})
    assert requests == {"attr-major": 5, "tile-major": 1}


def test_overwrites_consolidation_and_time_travel_keep_their_meaning() -> None:
    schema = _schema("tile-major", n_attrs=3)
    arr = tessera.create_array("memory://tm-history", schema)
    first, second = _values(schema, 1), _values(schema, 2)
    arr.write(first)
    t1 = arr.fragments[-1].timestamp
    arr.write({n: v[8:40] for n, v in second.items()}, origin=(8, 0))
    arr.write_cells((np.array([0, 63]), np.array([0, 15])),
                    {n: np.array([100, -100], np.int8) for n in first})
    expected = {n: first[n].copy() for n in first}
    for n in expected:
        expected[n][8:40] = second[n][8:40]
        expected[n][0, 0], expected[n][63, 15] = 100, -100
    assert all(np.array_equal(arr.read(attrs=[n])[n], expected[n]) for n in expected)
    assert arr.consolidate() is not None
    assert all(np.array_equal(arr.read(attrs=[n])[n], expected[n]) for n in expected)
    old = tessera.open_array("memory://tm-history", at=t1)
    assert all(np.array_equal(old.read(attrs=[n])[n], first[n]) for n in first)


def test_the_layout_is_part_of_the_schema() -> None:
    schema = _schema("tile-major")
    again = tessera.ArraySchema.from_json(schema.to_json())
    assert again.attr_layout == "tile-major"
    assert '"attr_layout"' not in _schema("attr-major").to_json()
    with pytest.raises(SchemaError, match="attr_layout must be one of"):
        _schema("column-major")
