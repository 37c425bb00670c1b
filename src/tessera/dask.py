"""Dask arrays over Tessera arrays (needs the ``dask`` extra): ``from_array`` (chunks are
tiles, tasks are planned reads) and ``to_array`` (one fragment per block, written in
parallel). See :mod:`tessera.integrations.dask_array`.
"""

from tessera.integrations.dask_array import TileSource, from_array, to_array

__all__ = ["TileSource", "from_array", "to_array"]
