"""The DataLoader every Tessera dataset hands out, and the one policy for its workers.

**Start method.** Workers start with ``spawn``, for every dataset kind. ``fork`` is out:
obstore's I/O runtime does not survive it once the parent has done I/O (local-folder and S3
stores hang or crash in the child, even ones opened afresh there) and delta-rs panics in a
forked child. Of the two that remain, ``spawn`` starts a worker as fast as ``forkserver``
does here (each imports torch once) and makes the workers children of the training process,
so a worker's death is seen at once instead of at the loader's next 5-second status check.

**The main-module guard.** A spawned worker starts by running the main script again (as
``__mp_main__``): whatever the script does at its top level outside
``if __name__ == "__main__":`` runs once more in every worker. A script that iterates a
multi-worker loader at its top level therefore cannot work; :class:`Loader` says so, naming
the line, before it starts any worker. A worker that dies for another reason (a top-level
statement that fails when run again, an out-of-memory kill) becomes a
:class:`~tessera.errors.WorkerError` naming what Tessera can see, raised in the training
process as soon as the death is noticed, instead of PyTorch's bare "exited unexpectedly".

>>> import numpy as np, tessera
>>> from tessera.torch import ArrayDataset
>>> _ = tessera.from_numpy("memory://doc-loading", np.arange(8).reshape(4, 2))
>>> loader = ArrayDataset("memory://doc-loading").loader(batch_size=2)
>>> type(loader).__name__, [b.tolist() for b in loader]
('Loader', [[[0, 1], [2, 3]], [[4, 5], [6, 7]]])
"""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from tessera.errors import WorkerError

#: The start method of every Tessera loader's workers (see the module docs).
START_METHOD = "spawn"

#: PyTorch's words for a worker that died (its RuntimeError messages).
_DEATH = ("exited unexpectedly", "killed by signal")

GUARD = 'if __name__ == "__main__":'


class Loader(DataLoader[Any]):
    """A :class:`torch.utils.data.DataLoader` whose workers start with ``spawn`` and whose
    worker failures are explained (see the module docs). Takes DataLoader's arguments."""

    def __init__(self, dataset: Any, **kwargs: Any) -> None:
        if kwargs.get("num_workers", 0) > 0:
            kwargs.setdefault("multiprocessing_context", START_METHOD)
        super().__init__(dataset, **kwargs)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]  # wraps torch's iterator
        if self.num_workers > 0 and (where := unguarded_caller()) is not None:
            raise WorkerError(
                f"this loader's {self.num_workers} worker processes would each run the main "
                f"script again and stop at {where}, which iterates the loader outside "
                f"`{GUARD}`. Put the script's work under that guard (or in a function called "
                "from it); in a notebook or with num_workers=0 no guard is needed")
        return _Explained(super().__iter__())


class _Explained:
    """A DataLoader iterator whose worker deaths raise :class:`WorkerError`."""

    def __init__(self, inner: Iterator[Any]) -> None:
        self._inner = inner

    def __iter__(self) -> _Explained:
        return self

    def __len__(self) -> int:
        return len(self._inner)  # type: ignore[arg-type]

    def __next__(self) -> Any:
        try:
            return next(self._inner)
        except RuntimeError as err:
            if isinstance(err, WorkerError) or not any(w in str(err) for w in _DEATH):
                raise
            raise WorkerError(explain_death(str(err))) from err


def explain_death(torch_message: str) -> str:
    """What Tessera can say about a worker that died, from PyTorch's message and the main
    script's top level."""
    text = (f"a DataLoader worker died ({torch_message.split('. ')[0].strip()}); its own "
            "error, if it printed one, is above on stderr")
    script, lines = main_script(), []
    if script is not None:
        lines = unguarded_work(script)
    if lines:
        shown = ", ".join(str(n) for n in lines[:8]) + (", ..." if len(lines) > 8 else "")
        text += (f". Workers start by running the main script again: {script} does work at "
                 f"its top level outside `{GUARD}` (line(s) {shown}), which ran again in the "
                 "worker. Put that work under the guard, so that only the training process "
                 "creates data and starts loaders")
    else:
        text += (". Rerun with num_workers=0 to see the failure in this process, or check "
                 "the memory the workers use")
    return text


def main_script() -> str | None:
    """The main script's path, if workers will run it again (``None`` in a notebook, an
    interactive session or ``python -c``)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return path if isinstance(path, str) and Path(path).is_file() else None


def unguarded_caller() -> str | None:
    """``"script, line N"`` if the code running now was called from a top-level statement of
    the main script outside its ``__main__`` guard, else ``None``."""
    main = sys.modules.get("__main__")
    script = main_script()
    if main is None or script is None:
        return None
    top: types.FrameType | None = None
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            top = frame
        frame = frame.f_back
    if top is None:
        return None
    line = top.f_lineno
    for node in _top_level(script):
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return None if _is_guard(node) else f"{script}, line {line}"
    return None


def unguarded_work(script: str) -> list[int]:
    """The lines of the script's top-level statements outside the ``__main__`` guard that
    call something (imports, definitions and plain constants excepted)."""
    return [node.lineno for node in _top_level(script)
            if not isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef,
                                     ast.AsyncFunctionDef, ast.ClassDef))
            and not _is_guard(node)
            and any(isinstance(n, ast.Call) for n in ast.walk(node))]


def _top_level(script: str) -> list[ast.stmt]:
    try:
        with open(script, encoding="utf-8") as f:
            return ast.parse(f.read(), script).body
    except (OSError, SyntaxError, ValueError):
        return []


def _is_guard(node: ast.stmt) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":`` (either side)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))
