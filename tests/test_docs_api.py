"""The examples of docs/api.md run as written (in a temporary folder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("deltalake")

PAGE = Path(__file__).parents[1] / "docs" / "api.md"


def test_the_api_page_runs(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)  # the page writes below data/
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    shown = capsys.readouterr().out
    assert "<tessera.Array" in shown and "create" in shown and "write" in shown


def test_the_api_page_names_only_verbs_that_exist() -> None:
    import tessera
    import tessera.h5
    import tessera.torch

    for name in ("open", "open_array", "open_table", "open_images", "create_array",
                 "create_table", "create_images", "from_numpy", "Plan", "History"):
        assert f"tessera.{name}" in PAGE.read_text() and hasattr(tessera, name), name
    assert hasattr(tessera.h5.File, "__enter__")
    assert hasattr(tessera.torch.DistributedGroupSampler, "state_dict")
