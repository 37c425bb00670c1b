"""Dask arrays over Tessera arrays (needs the ``dask`` extra): ``from_array`` (chunks are
tiles, tasks are planned reads) and ``to_array`` (one fragment per block, written in
parallel). See :mod:`tessera.integrations.dask_array`. ``from_tensor`` builds a dask array of
a tensor table's tensor (:mod:`tessera.integrations.dask_tensors`).
"""

from tessera.integrations.dask_array import TileSource, from_array, to_array
from tessera.integrations.dask_tensors import TensorSource, from_tensor

__all__ = ["TensorSource", "TileSource", "from_array", "from_tensor", "to_array"]
