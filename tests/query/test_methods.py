"""The read-method registry: the built-in methods and modes, and a new method added as the
architecture page shows (one class, one registration) that plans and reads end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tessera
from tessera.config import PlannerConfig
from tessera.errors import ConfigError
from tessera.query.cost import RequestMix
from tessera.query.methods import (
    ChoiceContext,
    ReadMethod,
    ReadMode,
    methods,
    mode_names,
    read_method,
    read_mode,
    register_method,
    register_mode,
)
from tessera.query.need import TileNeed


def test_the_built_in_methods_and_modes() -> None:
    assert [m.name for m in methods()] == ["get", "range", "pushdown"]
    assert mode_names() == ("auto", "get", "merge", "fetch", "pushdown")
    assert read_mode("merge").method == "range" and read_mode("auto").method is None
    get, rng, push = (read_method(n) for n in ("get", "range", "pushdown"))
    assert (get.store_bytes, get.whole_tile, get.on_server) == (True, True, False)
    assert (rng.store_bytes, rng.whole_tile, rng.margin) == (True, False, 1.02)
    assert (push.store_bytes, push.on_server) == (False, True)
    with pytest.raises(ConfigError, match="choose one of auto, get, merge, fetch, pushdown"):
        read_mode("sideways")
    with pytest.raises(ConfigError, match="registered: get, range, pushdown"):
        read_method("sideways")


class WholeRange(ReadMethod):
    """The whole stored tile as one range request (a test method)."""

    name = "whole-range"

    def competes(self, need: TileNeed, allow_pushdown: bool) -> bool:
        return False  # only when forced

    def requests(self, need: TileNeed, ctx: ChoiceContext) -> list[tuple[int, int]]:
        return [(need.offset, need.offset + need.length)]

    def mix(self, requests: list[tuple[int, int]], need: TileNeed) -> RequestMix:
        return RequestMix(range_requests=len(requests),
                          range_bytes=sum(b - a for a, b in requests))


@pytest.fixture
def whole_range():
    """WholeRange registered (with its mode) for one test, unregistered after it."""
    from tessera.query.methods import registry

    saved = (dict(registry._METHODS), dict(registry._MODES))
    register_method(WholeRange())
    register_mode(ReadMode("whole-range", "whole-range"))
    yield
    registry._METHODS.clear()
    registry._METHODS.update(saved[0])
    registry._MODES.clear()
    registry._MODES.update(saved[1])


def test_a_registered_method_plans_and_reads(whole_range) -> None:
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy("memory://methods-whole-range", data, tile=(16, 16))
    assert PlannerConfig(method="whole-range").method == "whole-range"
    planned = tessera.open_array(arr.uri, config=dataclasses.replace(
        tessera.Config.from_env(), planner=PlannerConfig(method="whole-range")))
    assert planned.planner.method == "whole-range"  # a handle accepts a registered mode
    got = arr.read((slice(3, 40), slice(5, 9)), method="whole-range")
    assert np.array_equal(got, data[3:40, 5:9])
    plan = arr.last_read.plan
    assert {c.method for c in plan.choices} == {"whole-range"}
    assert plan.totals.range_requests == len(plan.choices) == 3  # three whole tiles
    # auto never picks it (it does not compete), and the built-ins are unchanged
    arr.read((slice(3, 40), slice(5, 9)))
    assert "whole-range" not in {c.method for c in arr.last_read.plan.choices}


def test_the_registry_refuses_taken_names_and_unknown_methods(whole_range) -> None:
    with pytest.raises(ConfigError, match="already registered"):
        register_method(WholeRange())
    with pytest.raises(ConfigError, match="already registered"):
        register_mode(ReadMode("merge", "range"))
    with pytest.raises(ConfigError, match="names no registered method"):
        register_mode(ReadMode("teleport", "teleport"))
