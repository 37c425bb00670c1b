"""PyTorch datasets over Tessera arrays (needs the ``torch`` extra).

``ArrayDataset`` gives one sample per index along a dimension; ``RegionDataset`` gives
regions of samples (crops around boxes, e.g. MegaDetector detections). A DataLoader batch is
read as one plan. See :mod:`tessera.integrations.torch_data`. ``FrequencyDataset`` and
``GroupShuffleSampler`` read image columns at the k each phase needs
(:mod:`tessera.integrations.frequency_data`). ``TensorTableDataset`` gives the samples of a
tensor table's tensors (:mod:`tessera.integrations.tensor_table_data`).
"""

from tessera.integrations.frequency_data import FrequencyDataset, GroupShuffleSampler
from tessera.integrations.tensor_table_data import TensorTableDataset
from tessera.integrations.torch_data import (
    ArrayDataset,
    RegionDataset,
    Resize,
    regions_from_megadetector,
)

__all__ = ["ArrayDataset", "FrequencyDataset", "GroupShuffleSampler", "RegionDataset", "Resize",
           "TensorTableDataset", "regions_from_megadetector"]
