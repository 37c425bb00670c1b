"""The frozen engine's one room: its public names from ``tessera.frozen`` (imported on
first use, so importing the package never imports torch), one static split rule shared by
the planner and the trainer, one check of a models folder under the server's registry."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torch")

import tessera.frozen
from tessera.frozen.planner import static_split


def test_the_package_exports_its_public_names_without_importing_torch() -> None:
    code = ("import sys, tessera.frozen as f; assert 'torch' not in sys.modules; "
            "print(sorted(f.__all__) == f.__all__, f.FrozenModel.__name__, "
            "'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["True", "FrozenModel", "True"], done.stderr
    for name in tessera.frozen.__all__:
        assert getattr(tessera.frozen, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tessera.frozen.nope  # noqa: B018


@pytest.mark.parametrize(("rule", "expected"), [("min", 2), ("nosplit", 0), ("freeze", 3),
                                                (1, 1), ("auto", None), ("sum", None)])
def test_one_static_rule(rule, expected) -> None:
    assert static_split(rule, 3, [40, 8, 8, 2]) == expected  # layer 4 lies past the freeze


def test_the_server_registry_and_the_cli_check_a_folder_the_same_way(tmp_path) -> None:
    from tessera.errors import ConfigError
    from tessera.frozen.manifest import InputSpec
    from tessera.frozen.models import checked_models, init_model
    from tessera.server.infer import ModelRegistry

    small = InputSpec(height=64, width=64)
    init_model("alexnet", tmp_path, name="a", num_classes=10, input=small)
    [checked] = checked_models(tmp_path)
    hosted = ModelRegistry(tmp_path).get("a")
    assert hosted.layers == checked.layers and hosted.max_split == checked.max_split
    init_model("alexnet", tmp_path / "bad", name="a", num_classes=10, input=small,
               max_split=99)
    for check in (checked_models, ModelRegistry):
        with pytest.raises(ConfigError, match="max_split 99"):
            check(tmp_path / "bad")
