"""PyTorch datasets over Tessera arrays (needs the ``torch`` extra).

``ArrayDataset`` gives one sample per index along a dimension; ``RegionDataset`` gives
regions of samples (crops around boxes, e.g. MegaDetector detections). A DataLoader batch is
read as one plan. See :mod:`tessera.integrations.torch_data`.
"""

from tessera.integrations.torch_data import (
    ArrayDataset,
    RegionDataset,
    Resize,
    regions_from_megadetector,
)

__all__ = ["ArrayDataset", "RegionDataset", "Resize", "regions_from_megadetector"]
