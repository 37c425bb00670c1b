"""The public API walked with bad arguments: every error a user can see is a TesseraError that
also derives from the builtin a Python user would catch (``ValueError``, ``TypeError``,
``KeyError``, ``IndexError``, ``LookupError``), and says what was wrong."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tessera
import tessera.h5
from tessera.config import PlannerConfig, ServerConfig, StoreConfig
from tessera.pushdown.framing import Limits
from tessera.pushdown.read_items import parse_read_request
from tessera.server.cache import TileCache
from tessera.testing.camera_trap import make_camera_trap_set


@pytest.fixture
def arr() -> tessera.Array:
    return tessera.from_numpy(f"memory://errors-{uuid.uuid4().hex[:8]}",
                              np.arange(64, dtype=np.int32).reshape(8, 8), tile=(4, 4))


Call = tuple[str, Callable[[], Any], type[BaseException], str]


def calls(arr: tessera.Array, folder: Path) -> list[Call]:
    store = arr.store
    uri = arr.uri
    naive = dt.datetime(2026, 1, 1)  # no tzinfo: UTC, before the array was made
    h5_url = f"memory://errors-h5-{uuid.uuid4().hex[:8]}"
    sparse = tessera.create_array(f"memory://errors-sparse-{uuid.uuid4().hex[:8]}",
                                  tessera.ArraySchema([tessera.Dim("x", (0.0, 9.0), 5.0),
                                                       tessera.Dim("y", (0.0, 9.0), 5.0)],
                                                      [tessera.Attr("v", "i4")],
                                                      sparse=True))
    return [
        ("unsupported URL", lambda: tessera.open_store("ftp://host/x"), ValueError, "ftp"),
        ("key escaping the root", lambda: store.get("../x"), ValueError, ".."),
        ("put mode", lambda: store.put("k", b"x", mode="append"),  # type: ignore[arg-type]
         ValueError, "put mode"),
        ("put create + if_match", lambda: store.put("k", b"x", mode="create", if_match="e"),
         ValueError, "exclude"),
        ("store config", lambda: StoreConfig(max_concurrency=0), ValueError,
         "max_concurrency"),
        ("planner method", lambda: tessera.open_array(uri, config=dataclasses.replace(
            tessera.Config.from_env(), planner=PlannerConfig(method="teleport"))),
         ValueError, "teleport"),
        ("planner method type", lambda: PlannerConfig(method=""), ValueError, "name"),
        ("server config", lambda: ServerConfig(max_items=0), ValueError, "max_items"),
        ("cache budget", lambda: TileCache(-1), ValueError, "cache budget"),
        ("array mode", lambda: tessera.open_array(uri, mode="a"), ValueError, "mode"),
        ("time before the first commit", lambda: tessera.open_array(uri, at=naive),
         LookupError, "before its first commit"),
        ("timestamp text", lambda: tessera.open_array(uri, at="yesterday"),
         ValueError, "not a point in time"),
        ("timestamp type", lambda: tessera.open_array(uri, at=1.5),  # type: ignore[arg-type]
         TypeError, "at must be"),
        ("pushdown type", lambda: tessera.open_array(uri, pushdown=5), TypeError, "pushdown"),
        ("no array", lambda: tessera.open_array(uri + "-missing"), FileNotFoundError, ""),
        ("selection out of range", lambda: arr[100], IndexError, "100"),
        ("write shape", lambda: arr.__setitem__((slice(0, 2), slice(0, 2)),
                                                np.zeros((3, 3), np.int32)),
         ValueError, "shape"),
        ("write dimensions", lambda: arr.write(np.zeros(4, np.int32)), ValueError,
         "dimensions"),
        ("write strings", lambda: arr.write(np.array([["a"]])), TypeError, "dtype"),
        ("write float64 into int32", lambda: arr.write(np.zeros((2, 2))), TypeError,
         "cast"),
        ("write_cells without cells", lambda: arr.write_cells(
            (np.array([], np.int64), np.array([], np.int64)), np.array([], np.int32)),
         ValueError, "no cells"),
        ("consolidate unknown", lambda: arr.consolidate(["f-nope"]), ValueError, "f-nope"),
        ("h5 mode", lambda: tessera.h5.File(h5_url, "z"), ValueError, "mode"),
        ("h5 missing name", lambda: tessera.h5.File(h5_url, "a")["nope"], KeyError, "nope"),
        ("h5 missing attribute", lambda: tessera.h5.File(h5_url, "a").attrs["nope"],
         KeyError, "nope"),
        ("mask of the wrong length", lambda: arr[np.ones(3, bool)], IndexError, "mask"),
        ("vindex not broadcasting", lambda: arr.vindex[[0, 1, 2], [0, 1]], IndexError,
         "broadcast"),
        ("vindex write shape", lambda: arr.vindex.__setitem__(([0, 1], [0, 1]), np.zeros(3)),
         ValueError, "shape"),
        ("asarray copy=False", lambda: np.asarray(arr, copy=False), ValueError, "copy=False"),
        ("missing metadata key", lambda: arr.metadata["nope"], KeyError, "nope"),
        ("metadata not JSON", lambda: arr.metadata.__setitem__("k", object()), TypeError,
         "JSON"),
        ("append to a fixed array", lambda: arr.append(np.zeros((1, 8), np.int32)),
         ValueError, "maxshape"),
        ("maxshape too small", lambda: tessera.ArraySchema(
            [tessera.Dim("x", (0, 3), 2)], [tessera.Attr("v", "i4")], maxshape=(1,)),
         ValueError, "maxshape"),
        ("pushdown request", lambda: parse_read_request(b"{", Limits()), ValueError, ""),
        ("camera-trap set", lambda: make_camera_trap_set(0), ValueError, "n >= 1"),
        ("int64 that does not fit int32", lambda: arr.__setitem__(
            (slice(0, 2), slice(0, 2)), np.full((2, 2), 2**40 + 7, np.int64)), TypeError,
         "outside [-2147483648, 2147483647]"),
        ("negative into uint8 through h5", lambda: tessera.h5.File(h5_url, "a")
         .create_dataset("u8", data=[-1], dtype="u1"), TypeError, "do not fit uint8"),
        ("cast rule", lambda: arr.write(np.zeros((1, 1), np.int32), cast="wrap"),  # type: ignore[arg-type]
         ValueError, "cast must be one of"),
        ("fractional origin", lambda: arr.write(np.zeros((1, 1), np.int32),
                                                origin=(0.5, 4)),  # type: ignore[arg-type]
         IndexError, "origin[0] must be an integer"),
        ("NaN origin", lambda: arr.write(np.zeros((1, 1), np.int32),
                                         origin=(float("nan"), 0)),  # type: ignore[arg-type]
         IndexError, "nan"),
        ("NaN sparse coordinate", lambda: sparse.write_cells(
            (np.array([np.nan, 2.0]), np.array([1.0, 3.0])), np.array([1, 2], np.int32)),
         IndexError, "is NaN"),
        ("NaN sparse bound", lambda: sparse[np.nan:5.0, :], IndexError, "NaN"),
        ("write config cast", lambda: tessera.WriteConfig(cast="wrap"),  # type: ignore[arg-type]
         ValueError, "cast"),
        ("server body timeout", lambda: ServerConfig(body_timeout_s=0), ValueError,
         "body_timeout_s"),
        *table_calls(folder),
    ]


def table_calls(folder: Path) -> list[Call]:
    """Bad table versions, where the tables extra is installed."""
    if importlib.util.find_spec("deltalake") is None:
        return []
    from tessera.tables import TensorTable

    url = f"file://{folder}/errors-table"
    TensorTable.create(url).write("a", np.ones(2))
    return [
        ("negative table version", lambda: TensorTable.open(url, version=-1), LookupError,
         "no version -1"),
        ("table version text", lambda: TensorTable.open(url, version="yesterday"), ValueError,
         "version='yesterday' is not a point in time"),
        ("table version type", lambda: TensorTable.open(url, version=1.5),  # type: ignore[arg-type]
         TypeError, "float"),
    ]


def test_every_error_of_the_public_api_is_a_tessera_error(arr: tessera.Array,
                                                          tmp_path: Path) -> None:
    seen = []
    for label, call, builtin, words in calls(arr, tmp_path):
        with pytest.raises(BaseException) as caught:  # its class is checked below
            call()
        err = caught.value
        assert isinstance(err, tessera.TesseraError), f"{label}: {type(err).__name__}: {err}"
        assert isinstance(err, builtin), f"{label}: {type(err).__mro__} lacks {builtin}"
        assert words in str(err), f"{label}: {err}"
        seen.append(type(err).__name__)
    assert {"InvalidArgumentError", "InvalidTypeError", "NameNotFoundError", "ConfigError",
            "SelectionError", "ProtocolError"} <= set(seen)


def test_the_errors_of_the_protocol_and_of_time_travel_live_in_errors_py() -> None:
    from tessera import errors
    from tessera.array import maintenance
    from tessera.pushdown import framing as protocol

    for name in ("ProtocolError", "ForbiddenKeyError", "LimitError"):
        assert getattr(protocol, name) is getattr(errors, name)  # still importable there
    assert maintenance.HistoryVacuumedError is errors.HistoryVacuumedError
    assert tessera.HistoryVacuumedError is errors.HistoryVacuumedError
    assert Limits() == Limits.of(ServerConfig())  # the limits' defaults are written once
