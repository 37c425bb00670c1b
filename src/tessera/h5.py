"""An h5py-shaped facade: ``import tessera.h5 as h5py`` and keep the script.

See :mod:`tessera.integrations.h5` for what it covers and how it lays data out.
"""

from tessera.integrations.h5 import AttributeManager, Dataset, File, Group

__all__ = ["AttributeManager", "Dataset", "File", "Group"]
