"""The array engine: dense arrays in tiles and immutable fragments (the TileDB paper)."""

from tessera.array.array import Array
from tessera.array.factories import create_array, from_numpy, open_array
from tessera.array.fragment import FragmentInfo
from tessera.array.read.report import ReadReport
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.format.tile import TileRead

__all__ = ["Array", "ArraySchema", "Attr", "Dim", "FragmentInfo", "ReadReport", "TileRead",
           "create_array", "from_numpy", "open_array"]
