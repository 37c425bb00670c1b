"""Features as a Tessera array: :func:`materialize` writes the layer-``s`` features of every
sample, computed beside the store (or here without a server), so later epochs read features
with ordinary region reads instead of recomputing them -- the "precompute embeddings" users
ask for, with the split as the fill path. Worth it when no random augmentation changes the
inputs between epochs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tessera.array.array import Array
from tessera.array.factories import create_array, open_array
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.frozen.remote import FrozenModel, features_of
from tessera.pushdown.client import PushdownClient


def materialize(net: FrozenModel, data: Array | str, split: int | str, out_uri: str, *,
                pushdown: PushdownClient | str | None = None, request_size: int = 128,
                chunk: int = 512, progress: Callable[[int, int], None] | None = None,
                ) -> tuple[Array, int]:
    """Write the layer-``split`` features of every sample of ``data`` as an array at
    ``out_uri`` (``(N, *feature shape)`` float32, one sample per tile) and return it with the
    number of chunks computed here after a server failure. ``pushdown``: the server
    (default ``net``'s); ``progress(done, total)`` after every chunk of ``chunk`` samples."""
    arr = data if isinstance(data, Array) else open_array(str(data))
    s = net.index(split)
    server: Any = net.server if pushdown is None else (
        pushdown if isinstance(pushdown, PushdownClient) else PushdownClient(pushdown))
    n = arr.shape[0]
    shape = net.layers[s - 1].shape
    dims = [Dim("sample", (0, n - 1), 1)] + [Dim(f"d{i}", (0, e - 1), e)
                                             for i, e in enumerate(shape)]
    out = create_array(out_uri, ArraySchema(dims, [Attr("features", "<f4")]))
    local = 0
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        feats, error = features_of(net, arr, list(range(start, stop)), s, server, request_size)
        local += error is not None
        out[start:stop] = feats.numpy()
        if progress is not None:
            progress(stop, n)
    return out, local
