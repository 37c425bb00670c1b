"""Every importer, in one home, each returning one :class:`ImportReport`:

- arrays (:mod:`tessera.importers.arrays`): ``.npy``/``.npz`` files, HDF5 files and zarr
  stores into Tessera arrays and :mod:`tessera.h5` files;
- images (:mod:`tessera.importers.images`): a folder of image files into an image set;
- tensors (:mod:`tessera.importers.tensors`): ``.pt`` and safetensors files into a tensor
  table.

The CLI's ``tessera import-*`` commands are thin faces over these functions. Each importer
loads its extra's packages only when called.
"""

from tessera.importers.arrays import import_hdf5, import_npy, import_zarr
from tessera.importers.report import ImportReport

__all__ = ["ImportReport", "import_hdf5", "import_images", "import_npy", "import_pt",
           "import_safetensors", "import_zarr"]


def __getattr__(name: str) -> object:
    """The image and tensor importers, imported on first use (their extras may be missing)."""
    if name == "import_images":
        from tessera.importers.images import import_images

        return import_images
    if name in ("import_pt", "import_safetensors"):
        from tessera.importers import tensors

        return getattr(tensors, name)
    raise AttributeError(f"module 'tessera.importers' has no attribute {name!r}")
