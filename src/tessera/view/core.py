"""The viewer's state: the viewed URL, its storage options, the read budget, and the handles
it opened (kept for the next request, newest last).

A page's first request opens its data again (so that a reload shows new commits); the
views that follow reuse that handle. One request is served at a time (handles are not
shared between threads).

A :class:`Viewer` is read-only: it opens with ``mode="r"`` and never writes. Given a
pushdown server (``pushdown=``, whose root holds the viewed URL), arrays may read through
it, and zoomed-out views of dense arrays do (only the sampled cells cross the link). Every path it
takes goes through :func:`~tessera.view.params.clean_path`, so nothing outside the viewed
URL can be named; every read is planned first and refused when the plan would move more
than ``budget_bytes`` (:class:`~tessera.errors.MemoryLimitError`, naming the view's bytes
and the budget).
"""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from typing import Any

from tessera.array.array import Array
from tessera.config import Config
from tessera.describe import a_kind
from tessera.errors import InvalidArgumentError, MemoryLimitError
from tessera.kinds import opened
from tessera.storage.blocking import Store, open_store
from tessera.view.params import child_url, clean_path
from tessera.when import moment

#: Handles kept open between requests.
KEEP_OPEN = 32
#: The default read budget of one request: 256 MiB.
BUDGET_BYTES = 256 << 20


class Viewer:
    """What one ``tessera view URL`` serves (see the module docstring).

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-viewer/a", np.zeros(3))
    >>> Viewer("memory://doc-viewer").open("a", None)[0]
    'array'
    """

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None,
                 config: Config | None = None, budget_bytes: int = BUDGET_BYTES,
                 models: Path | None = None, pushdown: Any = None) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.config = config or Config.from_env()
        self.budget_bytes = budget_bytes
        self.models = models
        #: The pushdown server arrays may use (a URL, URLs or a client; ``None``: none).
        self.pushdown = pushdown
        #: One request reads at a time: handles are not shared between threads.
        self.lock = threading.RLock()
        self._open: collections.OrderedDict[tuple[str, str | None], tuple[str, Any]] = \
            collections.OrderedDict()

    def store(self, path: str = "") -> Store:
        """The store at ``path`` below the viewed URL."""
        return open_store(child_url(self.url, clean_path(path)), config=self.config.store,
                          **self.storage_options)

    def open(self, path: str, at: str | None, *, fresh: bool = False) -> tuple[str, Any]:
        """The kind at ``path`` and its handle, read-only, as it was ``at`` (a commit
        marker or an ISO-8601 time; ``None``: now). ``fresh``: open it again even if a
        handle is kept (a page opened anew shows commits made since)."""
        key = (clean_path(path), at)
        with self.lock:
            if key in self._open and not fresh:
                self._open.move_to_end(key)
                return self._open[key]
            found = opened(child_url(self.url, key[0]), "r",
                           storage_options=self.storage_options, config=self.config,
                           at=moment(at, "at"), cache=None)  # image sets: reads say what they read
            if isinstance(found[1], Array) and self.pushdown is not None:
                found[1].pushdown = self.pushdown
            self._open[key] = found
            while len(self._open) > KEEP_OPEN:
                self._open.popitem(last=False)
            return found

    def open_kind(self, path: str, at: str | None, kind: str, *, fresh: bool = False) -> Any:
        """:meth:`open`, refusing anything but ``kind``."""
        found_kind, handle = self.open(path, at, fresh=fresh and at is None)
        if found_kind != kind:
            raise InvalidArgumentError(f"{path or 'the viewed URL'} is {a_kind(found_kind)}, "
                                       f"not {a_kind(kind)}")
        return handle

    def check_budget(self, nbytes: int, what: str) -> None:
        """Refuse a read of ``nbytes`` over the budget."""
        if nbytes > self.budget_bytes:
            raise MemoryLimitError(
                f"{what} would read {nbytes:,} bytes, over the viewer's budget of "
                f"{self.budget_bytes:,} bytes per request: zoom in, pick a smaller page, or "
                "start the viewer with a larger --budget-mb")
