"""A fragment's tile tables are parsed per attribute when a read needs them: a read of one
attribute parses that attribute's table only, a damaged table of another attribute does not
stop it (reading the damaged one is CorruptDataError naming the fragment), and a table whose
tile count does not fit the fragment is still refused when the fragment is opened."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera.array.bookkeeping import COLUMNS
from tessera.array.commits import META_CACHE
from tessera.array.lazy_attrs import LazyAttrs
from tessera.errors import CorruptDataError


def _three_attributes(tmp_path: Path) -> tuple[tessera.Array, str]:
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 7), 4), tessera.Dim("x", (0, 7), 4)],
                                 [tessera.Attr(n, "<i4", codec="zstd") for n in "abc"])
    arr = tessera.create_array(f"file://{tmp_path}/three", schema)
    arr.write({n: np.arange(64, dtype=np.int32).reshape(8, 8) * (i + 1)
               for i, n in enumerate("abc")}, origin=(0, 0))
    meta = next(o.key for o in arr.store.list("") if o.key.endswith("__meta.json"))
    return arr, meta


def _parsed() -> list[frozenset[str]]:
    """The parsed attributes of every fragment in the process's bookkeeping cache."""
    cache = META_CACHE()
    held = cache.keys()  # a list, taken under the cache's lock
    attrs = [cache.peek(key).attrs for key in held]
    assert all(isinstance(a, LazyAttrs) for a in attrs)
    return [a.parsed for a in attrs]


def test_a_read_of_one_attribute_parses_that_one(tmp_path: Path) -> None:
    arr, _ = _three_attributes(tmp_path)
    META_CACHE().clear()
    fresh = tessera.open_array(arr.uri)
    got = fresh.read((slice(0, 8), slice(0, 8)), attrs=["b"])
    assert np.array_equal(np.asarray(got["b"] if isinstance(got, dict) else got),
                          np.arange(64).reshape(8, 8) * 2)
    assert _parsed() == [frozenset({"b"})]


def test_a_damaged_table_of_another_attribute_does_not_stop_a_read(tmp_path: Path) -> None:
    arr, meta = _three_attributes(tmp_path)
    doc = json.loads(bytes(arr.store.get(meta)))
    offsets = doc["attrs"]["c"]["offsets"]
    doc["attrs"]["c"]["offsets"] = "!" * len(offsets)  # its length fits, its bytes do not
    arr.store.put(meta, json.dumps(doc).encode())
    META_CACHE().clear()
    fresh = tessera.open_array(arr.uri)
    got = fresh.read(attrs=["a"])
    assert np.array_equal(np.asarray(got["a"] if isinstance(got, dict) else got),
                          np.arange(64).reshape(8, 8))
    with pytest.raises(CorruptDataError, match="unreadable fragment bookkeeping") as caught:
        fresh.read(attrs=["c"])
    assert arr.uri in str(caught.value) and "fragment f" in str(caught.value)


def test_a_tile_count_that_does_not_fit_is_refused_at_open(tmp_path: Path) -> None:
    arr, meta = _three_attributes(tmp_path)
    doc = json.loads(bytes(arr.store.get(meta)))
    for column, dtype in COLUMNS.items():  # one tile fewer, in every column alike
        values = np.frombuffer(base64.b64decode(doc["attrs"]["b"][column]), dtype)
        doc["attrs"]["b"][column] = base64.b64encode(values[:-1].tobytes()).decode()
    arr.store.put(meta, json.dumps(doc).encode())
    META_CACHE().clear()
    with pytest.raises(CorruptDataError, match=r"attribute 'b'.* tiles stored for the 4 space"):
        tessera.open_array(arr.uri).read(attrs=["a"])
