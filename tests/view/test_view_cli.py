"""``tessera view`` as a user starts it: the installed command prints an address with a
token, the page answers with it and refuses without it; a host beyond this machine needs
``--allow-remote``; bad options are named."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app

EXE = shutil.which("tessera", path=str(Path(sys.executable).parent)) or "tessera"


def test_view_prints_an_address_whose_token_opens_the_page(tmp_path: Path) -> None:
    tessera.from_numpy(str(tmp_path / "frames"), np.arange(12).reshape(3, 4))
    server = subprocess.Popen([EXE, "view", str(tmp_path), "--port", "0", "--no-browser"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=(\S+)", line)
        assert found, (line, server.stderr.read() if server.poll() is not None else "")
        base, token = found.groups()
        assert httpx.get(base, timeout=30).status_code == 403
        page = httpx.get(base, params={"token": token}, timeout=30)
        assert page.status_code == 200 and "Tessera viewer" in page.text
        tree = httpx.get(base + "api/tree", params={"token": token}, timeout=30).json()
        assert tree[0]["path"] == "frames" and tree[0]["kind"] == "array"
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_a_host_beyond_this_machine_needs_allow_remote(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["view", str(tmp_path), "--host", "0.0.0.0",
                                      "--no-browser"])
    assert result.exit_code == 1
    assert "--allow-remote" in str(result.exception)


def test_a_budget_must_be_positive(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["view", str(tmp_path), "--budget-mb", "0"])
    assert result.exit_code == 2
    assert "--budget-mb" in result.output
