"""Dask arrays over Tessera arrays (needs the ``dask`` extra): ``from_array`` (chunks are
tiles, tasks are planned reads) and ``to_array`` (one fragment per block, written in
parallel). See :mod:`tessera.integrations.dask_array`. ``from_tensor`` builds a dask array of
a tensor table's tensor (:mod:`tessera.integrations.dask_tensors`); ``from_images`` one of
the images of an image-column set, chunked by group (:mod:`tessera.integrations.dask_images`).
"""

from typing import TYPE_CHECKING, Any

from tessera.integrations.dask_array import TileSource, from_array, to_array

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from tessera.integrations.dask_images import ImageSource, from_images
    from tessera.integrations.dask_tensors import TensorSource, from_tensor

__all__ = ["ImageSource", "TensorSource", "TileSource", "from_array", "from_images",
           "from_tensor", "to_array"]


def __getattr__(name: str) -> Any:
    """``from_tensor`` / ``TensorSource`` and ``from_images`` / ``ImageSource`` are imported
    on first use: they need the ``tables`` and ``images`` extras, which the array functions
    do not."""
    if name in ("from_tensor", "TensorSource"):
        from tessera.integrations import dask_tensors

        return getattr(dask_tensors, name)
    if name in ("from_images", "ImageSource"):
        from tessera.integrations import dask_images

        return getattr(dask_images, name)
    raise AttributeError(f"module 'tessera.dask' has no attribute {name!r}")
