"""An h5py-shaped facade: ``import tessera.h5 as h5py`` and keep the script.

See :mod:`tessera.integrations.h5` for what it covers and how it lays data out.
"""

from tessera.integrations.h5 import Dataset, File, Group
from tessera.integrations.h5_attrs import AttributeManager

__all__ = ["AttributeManager", "Dataset", "File", "Group"]
