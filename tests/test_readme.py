"""The README runs as written: its Python blocks in order, in one namespace, in an empty
folder (the S3 block against the S3 test server, through the ``AWS_*`` variables the README
names), and its shell block with the installed ``tessera`` command.

Not run here, and why: the set-up block (``make demo`` and ``make test``: CI runs them
itself)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
EXE = shutil.which("tessera", path=str(Path(sys.executable).parent)) or "tessera"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_the_python_blocks_run_in_order(tmp_path, monkeypatch, s3_server, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    options = s3_server.storage_options()
    for key, env in (("endpoint", "AWS_ENDPOINT_URL"), ("region", "AWS_REGION"),
                     ("access_key_id", "AWS_ACCESS_KEY_ID"),
                     ("secret_access_key", "AWS_SECRET_ACCESS_KEY")):
        monkeypatch.setenv(env, str(options[key]))
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    bucket = s3_server.unique_url("readme")
    namespace: dict[str, object] = {}
    python = blocks("python")
    assert len(python) >= 6
    for block in python:
        code = block.replace("s3://my-bucket", bucket)
        exec(compile(code, "README.md", "exec"), namespace)
    shown = capsys.readouterr().out
    assert "150550 0" in shown  # the time-travel line prints what its comment says
    assert "bsgs" in shown      # the mostly-zero tensor is stored sparse
    assert (tmp_path / "data" / "photos").is_dir()


def test_the_shell_block_runs(tmp_path, monkeypatch) -> None:
    import numpy as np

    import tessera

    monkeypatch.chdir(tmp_path)
    tessera.from_numpy("data/frames", np.arange(16).reshape(4, 4))
    tessera.create_table("data/tensors").write("a", np.zeros(3))
    (shell,) = [b for b in blocks("bash") if b.lstrip().startswith("tessera ls")]
    for line in shell.strip().splitlines():
        command = line.split("#")[0].strip().replace("tessera ", f"{EXE} ", 1)
        if " view " in f"{command} ":  # serves until stopped: started, then stopped
            server = subprocess.Popen([*command.split(), "--port", "0", "--no-browser"],
                                      cwd=tmp_path, stdout=subprocess.PIPE, text=True)
            try:
                assert server.stdout is not None and "?token=" in server.stdout.readline()
            finally:
                server.terminate()
                server.wait(timeout=60)
            continue
        done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, (command, done.stderr)
    assert np.load(tmp_path / "part.npy").tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
