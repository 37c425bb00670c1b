"""Loaders that cannot trip a newcomer, and a sampler written as PyTorch's.

Every dataset kind's ``loader()`` starts workers with ``spawn``; a plain script that
iterates a multi-worker loader at its top level (no ``__main__`` guard) stops with an
error naming the guard and the line before any worker starts; a worker that dies because
the script's top-level work ran again in it becomes a WorkerError naming the guard and the
lines, not PyTorch's bare "exited unexpectedly".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import tessera
from tessera.errors import InvalidArgumentError, InvalidTypeError, WorkerError
from tessera.integrations import loading
from tessera.torch import ArrayDataset, DistributedGroupSampler, FrequencyDataset

MAKE = {
    "array": """
        tessera.from_numpy(URL, np.arange(64 * 8, dtype=np.float32).reshape(64, 8),
                           tile=(8, 8))
        ds = ArrayDataset(URL)
    """,
    "table": """
        from tessera.tables import TensorTable
        from tessera.torch import TensorTableDataset
        TensorTable.create(URL).write("x", np.ones((64, 8), np.float32))
        ds = TensorTableDataset(URL)
    """,
    "images": """
        from tessera.images import ImageColumns
        ImageColumns.create(URL, size=(32, 32), group=8).append(
            np.zeros((32, 32, 32, 3), np.uint8))
        ds = FrequencyDataset(URL, k=2, labels=False)
    """,
}

HEAD = """
import numpy as np
import tessera
from tessera.torch import ArrayDataset, FrequencyDataset
URL = {url!r}
"""


def _run(script: str, tmp_path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "train.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


@pytest.mark.parametrize("kind", sorted(MAKE))
def test_a_script_without_the_guard_stops_naming_it(kind, tmp_path) -> None:
    url = (tmp_path / "data").as_uri()
    script = (HEAD.format(url=url) + textwrap.dedent(MAKE[kind])
              + "for batch in ds.loader(batch_size=8, num_workers=2):\n    pass\n")
    done = _run(script, tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    line = len(script.splitlines())
    assert last.startswith("tessera.errors.WorkerError"), done.stderr[-2000:]
    assert 'if __name__ == "__main__":' in last and f"train.py, line {line - 1}" in last
    assert "exited unexpectedly" not in done.stderr  # no worker was started at all


def test_a_worker_that_dies_on_the_scripts_top_level_work_is_explained(tmp_path) -> None:
    url = (tmp_path / "data").as_uri()
    script = (HEAD.format(url=url) + textwrap.dedent(MAKE["array"])
              + "if __name__ == '__main__':\n"
              + "    for batch in ds.loader(batch_size=8, num_workers=2):\n        pass\n")
    done = _run(script, tmp_path)
    assert done.returncode != 0
    # the worker's own error (the array exists when the script runs again) is on stderr
    assert "ArrayExistsError" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tessera.errors.WorkerError"), done.stderr[-2000:]
    assert "line(s) 7, 9" in last and 'if __name__ == "__main__":' in last


def test_a_guarded_script_trains_with_workers(tmp_path) -> None:
    url = (tmp_path / "data").as_uri()
    body = textwrap.indent(textwrap.dedent(MAKE["array"]), "    ")
    script = (HEAD.format(url=url) + "if __name__ == '__main__':\n" + body
              + "    print(sum(float(b.sum()) for b in ds.loader(batch_size=8, "
                "num_workers=2)))\n")
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout) == float(np.arange(64 * 8).sum())


def test_every_loader_starts_workers_with_spawn(tmp_path) -> None:
    url = (tmp_path / "a").as_uri()
    tessera.from_numpy(url, np.zeros((4, 2), np.float32))
    loader = ArrayDataset(url).loader(num_workers=2)
    assert isinstance(loader, loading.Loader)
    assert loader.multiprocessing_context.get_start_method() == "spawn"
    assert ArrayDataset(url).loader().multiprocessing_context is None  # no workers


def test_the_guard_is_recognised_in_either_order(tmp_path) -> None:
    path = tmp_path / "s.py"
    path.write_text("import os\nX = 3\nprint(X)\nif '__main__' == __name__:\n    print(1)\n"
                    "def f():\n    return os.getpid()\nY = f()\n")
    assert loading.unguarded_work(str(path)) == [3, 8]
    assert loading.unguarded_work(str(tmp_path / "missing.py")) == []


def test_a_death_message_without_a_script_says_how_to_see_the_error(monkeypatch) -> None:
    monkeypatch.setattr(loading, "main_script", lambda: None)
    text = loading.explain_death("DataLoader worker (pid(s) 1) exited unexpectedly")
    assert "num_workers=0" in text and "pid(s) 1" in text


def _groups(sampler: DistributedGroupSampler, keys) -> set:
    return {keys[p] for p in sampler}


@pytest.mark.parametrize("kind", ["array", "table", "images"])
def test_two_ranks_written_as_pytorch_users_write_them_fetch_disjoint_groups(
        kind, tmp_path, monkeypatch) -> None:
    url = (tmp_path / kind).as_uri()
    if kind == "array":
        tessera.from_numpy(url, np.zeros((64, 4), np.float32), tile=(4, 4))
        ds = ArrayDataset(url)
    elif kind == "table":
        from tessera.tables import TensorTable
        from tessera.torch import TensorTableDataset

        monkeypatch.setenv("TESSERA_TABLES_CHUNK_BYTES", "64")  # 4 rows a group
        TensorTable.create(url).write("x", np.zeros((64, 4), np.float32))
        ds = TensorTableDataset(url)
    else:
        from tessera.images import ImageColumns

        ImageColumns.create(url, size=(32, 32), group=4).append(
            np.zeros((64, 32, 32, 3), np.uint8))
        ds = FrequencyDataset(url, k=1, labels=False)
    keys = ds.group_keys()
    assert len(set(keys)) == 16
    ranks = [DistributedGroupSampler(ds, num_replicas=2, rank=r, seed=0) for r in (0, 1)]
    mine = [_groups(s, keys) for s in ranks]
    assert not mine[0] & mine[1] and len(mine[0] | mine[1]) == 16
    positional = DistributedGroupSampler(ds, 2, 1, True, 0)  # DistributedSampler's order
    assert list(positional) == list(ranks[1])


def test_the_sampler_refuses_what_it_cannot_shard_by_group() -> None:
    class Plain(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> int:
            return i

    with pytest.raises(InvalidTypeError, match=r"cannot shard a Plain by group.*keys="):
        DistributedGroupSampler(Plain(), num_replicas=2, rank=0)
    with pytest.raises(InvalidArgumentError, match="needs a dataset"):
        DistributedGroupSampler(num_replicas=2, rank=0)
    with pytest.raises(InvalidArgumentError, match="not both"):
        DistributedGroupSampler([0, 1], keys=[0, 1], num_replicas=2, rank=0)


def test_old_spellings_work_with_a_deprecation_warning(tmp_path) -> None:
    keys = [0, 0, 1, 1]
    with pytest.warns(DeprecationWarning, match="keys="):
        old = DistributedGroupSampler(keys, num_replicas=2, rank=0, seed=0)
    assert list(old) == list(DistributedGroupSampler(keys=keys, num_replicas=2, rank=0, seed=0))
    url = (tmp_path / "a").as_uri()
    tessera.from_numpy(url, np.zeros((8, 2), np.float32), tile=(2, 2))
    ds = ArrayDataset(url)
    with pytest.warns(DeprecationWarning, match=r"DistributedGroupSampler\(dataset"):
        legacy = DistributedGroupSampler.for_dataset(ds, num_replicas=2, rank=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(legacy) == list(DistributedGroupSampler(ds, num_replicas=2, rank=1))


def test_a_worker_error_is_a_runtime_error() -> None:
    assert issubclass(WorkerError, RuntimeError)
