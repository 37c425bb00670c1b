"""Property test: any sequence of store operations behaves like a plain dict of bytes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import tessera

# No key is a path prefix of another: a folder store cannot hold both "d" and "d/x".
KEYS = st.sampled_from(["a", "b", "d/x", "d/y", "d/e/z"])
DATA = st.binary(min_size=0, max_size=300)


def make_machine(url: str, options: dict) -> type[RuleBasedStateMachine]:
    class StoreVsDict(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store = tessera.open_store(f"{url.rstrip('/')}/{uuid.uuid4().hex[:10]}",
                                            **options)
            self.model: dict[str, bytes] = {}

        @rule(key=KEYS, data=DATA)
        def put(self, key: str, data: bytes) -> None:
            self.store.put(key, data)
            self.model[key] = data

        @rule(key=KEYS, data=DATA)
        def create(self, key: str, data: bytes) -> None:
            if key in self.model:
                with pytest.raises(tessera.ObjectExistsError):
                    self.store.put(key, data, mode="create")
            else:
                self.store.put(key, data, mode="create")
                self.model[key] = data

        @rule(key=KEYS)
        def delete(self, key: str) -> None:
            self.store.delete(key)
            self.model.pop(key, None)

        @precondition(lambda self: bool(self.model))
        @rule(data=st.data())
        def read_range(self, data: st.DataObject) -> None:
            key = data.draw(st.sampled_from(sorted(self.model)))
            value = self.model[key]
            offset = data.draw(st.integers(0, len(value) + 5))
            length = data.draw(st.integers(0, max(1, len(value) - offset + 2)))
            if length == 0:
                assert bytes(self.store.get_range(key, offset, 0)) == b""
            elif offset >= len(value):
                with pytest.raises(tessera.InvalidRangeError):
                    self.store.get_range(key, offset, length)
            else:
                got = bytes(self.store.get_range(key, offset, length))
                assert got == value[offset:offset + length]

        @rule(key=KEYS)
        def get(self, key: str) -> None:
            if key in self.model:
                assert bytes(self.store.get(key)) == self.model[key]
            else:
                with pytest.raises(tessera.ObjectNotFoundError):
                    self.store.get(key)

        @invariant()
        def listing_matches(self) -> None:
            listed = {o.key: o.size for o in self.store.list()}
            assert listed == {k: len(v) for k, v in self.model.items()}

    return StoreVsDict


def test_store_behaves_like_a_dict(store_url) -> None:
    url, options = store_url
    machine = make_machine(url, options)
    machine.TestCase.settings = settings(max_examples=25, stateful_step_count=20,
                                         deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
    machine.TestCase().runTest()
