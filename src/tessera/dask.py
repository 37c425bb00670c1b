"""Dask arrays over Tessera arrays (needs the ``dask`` extra): ``from_array`` (chunks are
tiles, tasks are planned reads) and ``to_array`` (one fragment per block, written in
parallel). See :mod:`tessera.integrations.dask_array`. ``from_tensor`` builds a dask array of
a tensor table's tensor (:mod:`tessera.integrations.dask_tensors`).
"""

from typing import TYPE_CHECKING, Any

from tessera.integrations.dask_array import TileSource, from_array, to_array

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from tessera.integrations.dask_tensors import TensorSource, from_tensor

__all__ = ["TensorSource", "TileSource", "from_array", "from_tensor", "to_array"]


def __getattr__(name: str) -> Any:
    """``from_tensor`` and ``TensorSource`` are imported on first use: they need the
    ``tables`` extra, which the array functions do not."""
    if name in ("from_tensor", "TensorSource"):
        from tessera.integrations import dask_tensors

        return getattr(dask_tensors, name)
    raise AttributeError(f"module 'tessera.dask' has no attribute {name!r}")
