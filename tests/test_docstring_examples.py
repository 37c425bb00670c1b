"""Every public name of the faces (``tessera``, ``tessera.torch``, ``tessera.dask``,
``tessera.h5``, ``tessera.view``) has a docstring with an example (``>>>``), which
tests/test_doctests.py runs. Constants are documented by a ``#:`` comment instead (the
reference shows it); they carry no docstring of their own at run time."""

from __future__ import annotations

import importlib
import inspect

import pytest

FACES = ["tessera", "tessera.torch", "tessera.dask", "tessera.h5", "tessera.view"]


def _public(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [n for n in dir(module)
                                                 if not n.startswith("_")]
    out = []
    for name in names:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            out.append((f"{module_name}.{name}", obj))
    return out


NAMES = [item for face in FACES for item in _public(face)]


@pytest.mark.parametrize(("name", "obj"), NAMES, ids=[n for n, _ in NAMES])
def test_a_public_name_has_an_example(name: str, obj: object) -> None:
    doc = inspect.getdoc(obj) or ""
    assert doc, f"{name} has no docstring"
    assert ">>>" in doc, f"{name}'s docstring has no example"


def test_the_faces_have_names() -> None:
    assert len(NAMES) > 90
