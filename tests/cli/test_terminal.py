"""The command line in a terminal (a pseudo-terminal of 80x24 driven by pexpect): an import
draws its progress bar (and does not with ``-q``), ``rm`` asks before removing."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pexpect = pytest.importorskip("pexpect")

EXE = shutil.which("tessera", path=str(Path(sys.executable).parent)) or "tessera"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _spawn(args: list[str], cwd: Path) -> pexpect.spawn:
    env = {**os.environ, "TERM": "xterm-256color", "TESSERA_DEBUG": "0"}
    env.pop("COLUMNS", None)
    env.pop("NO_COLOR", None)
    return pexpect.spawn(EXE, args, cwd=str(cwd), env=env, dimensions=(24, 80),
                         encoding="utf-8", timeout=120)


def _finish(child: pexpect.spawn) -> tuple[str, int]:
    child.expect(pexpect.EOF)
    child.close()
    return ANSI.sub("", child.before or ""), int(child.exitstatus or 0)


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(40):
        Image.fromarray(np.full((32, 32, 3), i, np.uint8)).save(folder / f"{i:02}.png")
    return folder


def test_an_import_on_a_terminal_draws_its_progress_bar(photos: Path, tmp_path: Path) -> None:
    child = _spawn(["import", "images", str(photos), "set", "--size", "32", "--flush", "8"],
                   tmp_path)
    text, status = _finish(child)
    assert status == 0, text
    assert "importing images" in text and "━" in text and "40/40" in text
    assert "import images: 40 images" in text
    quiet = _spawn(["import", "images", str(photos), "quiet", "--size", "32", "-q"], tmp_path)
    text, status = _finish(quiet)
    assert status == 0 and "import images: 40 images" in text
    assert "━" not in text and "importing images" not in text


def test_rm_asks_on_a_terminal(photos: Path, tmp_path: Path) -> None:
    child = _spawn(["import", "images", str(photos), "set", "--size", "32", "-q"], tmp_path)
    assert _finish(child)[1] == 0
    no = _spawn(["rm", "set"], tmp_path)
    no.expect(r"Remove the image set at set \(\d+ objects, .*\)\? \[y/N\]: ")
    no.sendline("n")
    text, status = _finish(no)
    assert status == 1 and "nothing removed" in text and (tmp_path / "set").exists()
    yes = _spawn(["rm", "set"], tmp_path)
    yes.expect(r"\[y/N\]: ")
    yes.sendline("y")
    text, status = _finish(yes)
    assert status == 0 and "removed the image set at set" in text
    assert not (tmp_path / "set").exists()
