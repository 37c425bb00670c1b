"""PyTorch datasets over Tessera arrays (needs the ``torch`` extra).

``ArrayDataset`` gives one sample per index along a dimension; ``RegionDataset`` gives
regions of samples (crops around boxes, e.g. MegaDetector detections). A DataLoader batch is
read as one plan. See :mod:`tessera.integrations.torch_data`. ``FrequencyDataset`` and
``GroupShuffleSampler`` read image columns at the k each phase needs
(:mod:`tessera.integrations.frequency_data`). ``TensorTableDataset`` gives the samples of a
tensor table's tensors (:mod:`tessera.integrations.tensor_table_data`).
"""

from typing import TYPE_CHECKING, Any

from tessera.integrations.frequency_data import FrequencyDataset, GroupShuffleSampler
from tessera.integrations.torch_data import (
    ArrayDataset,
    RegionDataset,
    Resize,
    regions_from_megadetector,
)

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from tessera.integrations.tensor_table_data import TensorTableDataset

__all__ = ["ArrayDataset", "FrequencyDataset", "GroupShuffleSampler", "RegionDataset", "Resize",
           "TensorTableDataset", "regions_from_megadetector"]


def __getattr__(name: str) -> Any:
    """``TensorTableDataset`` is imported on first use: it needs the ``tables`` extra, which
    the other datasets do not."""
    if name == "TensorTableDataset":
        from tessera.integrations.tensor_table_data import TensorTableDataset

        return TensorTableDataset
    raise AttributeError(f"module 'tessera.torch' has no attribute {name!r}")
