"""How a tensor table shows itself (:class:`TableFace`, a base of
:class:`~tessera.tables.table.TensorTable`): its history as typed commits, a one-line
``repr`` and, in notebooks, a table of its tensors.

>>> import numpy as np, tempfile
>>> from tessera.tables import TensorTable
>>> tt = TensorTable.create("file://" + tempfile.mkdtemp() + "/t")
>>> _ = tt.write("x", np.ones((4, 2)))
>>> [(c.marker, c.operation, c.added, c.unit) for c in tt.history()]
[(0, 'create', 0, 'files'), (1, 'write', 1, 'files')]
>>> repr(tt).endswith("version 1, 1 tensor>")
True
"""

from __future__ import annotations

import asyncio
import datetime as dt
import html
from typing import TYPE_CHECKING, Any

from tessera._sync import run_sync
from tessera.tables.catalog import log_entry
from tessera.when import Commit, History

if TYPE_CHECKING:
    from tessera.storage.blocking import Store
    from tessera.tables.ref import TensorRef

#: Tensors a notebook's table lists at most.
HTML_ROWS = 50


class TableFace:
    """Description of a tensor table (state and reads are
    :class:`~tessera.tables.table.TensorTable`'s)."""

    url: str
    store: Store
    mode: str

    if TYPE_CHECKING:
        @property
        def version(self) -> int:
            """The version this handle reads."""

        def ids(self, prefix: str | None = None) -> list[str]:
            """The tensors' ids."""

        def __getitem__(self, tensor_id: str) -> TensorRef:
            """A tensor."""

    def history(self) -> History:
        """The table's commits up to this handle's version, oldest first: when, the Delta
        operation (``create``, ``write``, ``delete``, ``optimize``, ``restore``, ...), the
        data files each added and removed and the bytes it added, read from the transaction
        log's entries (commits whose entry was cleaned up after a checkpoint are left
        out)."""
        async def entries() -> list[list[dict[str, Any]] | None]:
            return list(await asyncio.gather(*(log_entry(self.store.aio, v)
                                               for v in range(self.version + 1))))

        out = History()
        for version, actions in enumerate(run_sync(entries())):
            if actions is None:  # cleaned up after a checkpoint
                continue
            info: dict[str, Any] = next((a["commitInfo"] for a in actions
                                         if "commitInfo" in a), {})
            adds = [a["add"] for a in actions if "add" in a]
            operation = str(info.get("operation", "?")).lower().replace("create table",
                                                                        "create")
            out.append(Commit(dt.datetime.fromtimestamp(int(info.get("timestamp", 0)) / 1e3,
                                                        dt.UTC),
                              version, operation, len(adds),
                              sum("remove" in a for a in actions), "files",
                              sum(int(a.get("size", 0)) for a in adds)))
        return out

    def __repr__(self) -> str:
        count = len(self.ids())
        return (f"<tessera.TensorTable {self.url} mode={self.mode!r} version {self.version}, "
                f"{count} tensor{'s' if count != 1 else ''}>")

    def _repr_html_(self) -> str:
        """A notebook's view: the version and each tensor's shape, dtype, layout and
        non-zeros (the first ``HTML_ROWS``)."""
        ids = self.ids()
        rows = "".join(
            f"<tr><td>{html.escape(i)}</td><td>{ref.shape}</td><td>{ref.dtype}</td>"
            f"<td>{ref.layout}</td><td>{ref.nnz:,}</td></tr>"
            for i in ids[:HTML_ROWS] for ref in [self[i]])
        more = f"<br>... {len(ids) - HTML_ROWS} more" if len(ids) > HTML_ROWS else ""
        return (f"<div><b>tessera.TensorTable</b> <code>{html.escape(self.url)}</code> "
                f"version {self.version}, {len(ids)} tensor(s)<table><thead><tr><th>id</th>"
                f"<th>shape</th><th>dtype</th><th>layout</th><th>non-zeros</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>{more}</div>")
