"""Every command's help, read as a user reads it: the installed ``tessera`` executable at 80
columns, piped. Each help has an Examples section, and its commands run, in a fixed order,
in a temporary folder holding the files they name; no help line is a ragged wrap."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import typer.main

from tessera.cli.main import app

torch = pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")
pytest.importorskip("safetensors")

BIN = Path(sys.executable).parent
EXE = shutil.which("tessera", path=str(BIN)) or "tessera"
#: The order the examples run in: each needs what the ones before it made.
ORDER = ["import npy", "import hdf5", "import zarr", "import pt", "import safetensors",
         "import images", "ls", "info", "history", "cat", "export npy",
         "export safetensors", "export images", "array explain",
         "array consolidate", "array vacuum", "table ls", "table info", "table optimize",
         "table vacuum", "table rm", "images info", "store stat", "store profile",
         "model init", "model check", "model convert", "serve", "view", "model profile",
         "model explain", "cp", "rm"]


def _commands() -> list[str]:
    """Every visible command, as its words after ``tessera``."""
    found: list[str] = []

    def walk(command: object, path: str) -> None:
        subs = getattr(command, "commands", None)
        if subs is None:
            found.append(path)
            return
        for name, sub in subs.items():
            if not getattr(sub, "hidden", False):
                walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def _env(tmp: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "80", "TESSERA_DEBUG": "0",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if tmp is not None:
        env["TESSERA_PROFILE_DIR"] = str(tmp / "profiles")
    return env


def _help(command: str) -> str:
    done = subprocess.run([EXE, *command.split(), "--help"], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _examples(text: str) -> list[str]:
    """The commands of a help's Examples section (continued lines joined)."""
    lines = text.split("Examples", 1)[1].splitlines()
    commands: list[str] = []
    for line in lines:
        body = line.strip()
        if body.startswith("╭"):
            break
        if commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1] + " " + body
        elif body.startswith("tessera "):
            commands.append(body)
    return commands


def test_the_order_covers_every_command() -> None:
    assert sorted(_commands()) == sorted(ORDER)
    assert len(typer.main.get_command(app).commands) - len(  # type: ignore[attr-defined]
        [c for c in typer.main.get_command(app).commands.values()  # type: ignore[attr-defined]
         if c.hidden]) <= 15  # a short top level: six verbs, view, two file groups, three
    # kinds, serve and two server groups


def _ragged(text: str, width: int = 80) -> list[tuple[str, str]]:
    """Ragged wraps: a line that ends mid-sentence, followed by a line of fewer than 3
    words whose first word would have fitted on it (so the width did not force the break:
    a hard line break in the source did)."""
    raw = [line.rstrip(" │") for line in text.splitlines()]
    rows = [re.sub(r"^[│\s]+", "", line) for line in raw]
    pairs = []
    for i, (this, after) in enumerate(itertools.pairwise(rows)):
        if not this or not after or this.startswith(("tessera ", "Usage:")):
            continue
        words = after.split()
        fits = len(raw[i]) + 1 + len(words[0]) <= width - 3
        if not this.endswith((".", ":", ";", "?", "!", ")", "]")) and len(words) < 3 \
                and fits and not after.startswith(("-", "[", "*", "tessera ")):
            pairs.append((this, after))
    return pairs


def test_the_ragged_wrap_check_finds_a_hard_break() -> None:
    hard = " Print the plan a read would follow: per tile the method, and the\n client.\n"
    assert _ragged(hard) == [(hard.splitlines()[0].strip(), "client.")]
    wrapped = " " + "word " * 15 + "and\n the end.\n"
    assert _ragged(wrapped) == []


@pytest.mark.parametrize("command", ["", *ORDER])
def test_help_reads_well(command: str) -> None:
    text = _help(command)
    assert _ragged(text) == []
    assert "<bool>" not in text and "…" not in text
    if command:
        assert "Examples" in text and _examples(text), text
        assert all(example.startswith(f"tessera {command}") for example in _examples(text))
        source = _source(command)  # nothing cut at 80 columns
        assert _examples(text) == _examples("Examples\n" + source.split("```")[1])


def _source(command: str) -> str:
    """A command's help as written in its docstring."""
    node = typer.main.get_command(app)
    for word in command.split():
        node = node.commands[word]  # type: ignore[attr-defined]
    return str(node.help)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _files(tmp: Path) -> None:
    """The files the examples name."""
    from PIL import Image
    from safetensors.numpy import save_file

    from tessera.frozen.arch import build

    rng = np.random.default_rng(0)
    np.save(tmp / "frames.npy", rng.random((64, 64)).astype(np.float32))
    np.save(tmp / "samples.npy", rng.integers(0, 256, (32, 3, 32, 32), dtype=np.uint8))
    with h5py.File(tmp / "scans.h5", "w") as f:
        f.create_dataset("a/scan", data=np.arange(100.0).reshape(10, 10), chunks=(5, 5))
    zarr.save_array(str(tmp / "volume.zarr"), np.arange(60).reshape(3, 4, 5))
    torch.save({"weights": torch.ones(3, 4), "extra": torch.zeros(2)}, tmp / "weights.pt")
    save_file({"weights": np.ones((2, 2), np.float32)}, str(tmp / "model.safetensors"))
    for folder, count in (("photos", 3), ("more-photos", 2)):
        for label in ("cat", "dog"):
            (tmp / folder / label).mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 256, (70, 80, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(tmp / folder / label / f"{i}.png")
    torch.save(build("resnet18", num_classes=10).state_dict(), tmp / "r18.pt")
    (tmp / "data" / "scratch").mkdir(parents=True)
    (tmp / "data" / "scratch" / "log.txt").write_text("a plain object")


def _serve(command: str, tmp: Path, port: int) -> subprocess.Popen[str]:
    server = subprocess.Popen(command, shell=True, cwd=tmp, env=_env(tmp), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)  # the shell and the server: one group
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.2)
    os.killpg(server.pid, signal.SIGKILL)
    raise AssertionError(f"{command} did not listen on port {port}")


def test_every_example_runs_in_order(tmp_path: Path) -> None:
    _files(tmp_path)
    port, view_port = _free_port(), _free_port()
    servers: list[subprocess.Popen[str]] = []
    ran: list[str] = []
    try:
        for command in ORDER:
            for example in _examples(_help(command)):
                example = example.replace("8700", str(port)).replace("8710", str(view_port))
                if command in ("serve", "view"):
                    servers.append(_serve(example, tmp_path,
                                          view_port if command == "view" else port))
                else:
                    done = subprocess.run(example, shell=True, cwd=tmp_path,
                                          env=_env(tmp_path), capture_output=True,
                                          text=True, timeout=600)
                    assert done.returncode == 0, (example, done.stdout, done.stderr)
                ran.append(example)
    finally:
        for server in servers:  # the whole group: terminating the shell alone leaves the server
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
    assert len(ran) >= len(ORDER)
    assert np.load(tmp_path / "part.npy").shape == (2, 64)  # export npy replaced cat's
    assert len(list((tmp_path / "exported").rglob("*.png"))) == 4
    assert json.loads((tmp_path / "r18.split-profile.json").read_text())["freeze"] > 0
    assert not (tmp_path / "data" / "frames-copy").exists()  # cp, then rm
    assert not (tmp_path / "data" / "scratch").exists()
