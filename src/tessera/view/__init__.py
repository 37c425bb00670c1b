"""``tessera view``: a local, read-only web viewer of what a store holds.

It shows the store as a tree of arrays, tensor tables, image sets and tessera.h5 files;
an array as any 2-D plane, zoomed and panned, with the plan of what is on screen; a tensor
table's versions and tensors; an image set as pages of thumbnails and one image at any
level of detail k. It binds to 127.0.0.1, needs the random token in the address it prints,
has no way to write, and refuses a request that would read more than its budget.

>>> import numpy as np, tessera
>>> from tessera.view import Viewer, running
>>> _ = tessera.from_numpy("memory://doc-view/a", np.arange(4))
>>> with running(Viewer("memory://doc-view")) as url:
...     url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

from tessera.view.app import HANDLERS, create_app
from tessera.view.core import BUDGET_BYTES, Viewer
from tessera.view.serve import running, serve

__all__ = ["BUDGET_BYTES", "HANDLERS", "Viewer", "create_app", "running", "serve"]
