"""PyTorch datasets over Tessera arrays (needs the ``torch`` extra).

``ArrayDataset`` gives one sample per index along a dimension; ``RegionDataset`` gives
regions of samples (crops around boxes, e.g. MegaDetector detections). A DataLoader batch is
read as one plan. See :mod:`tessera.integrations.torch_data`. ``FrequencyDataset`` and
``GroupShuffleSampler`` read image columns at the k each phase needs
(:mod:`tessera.integrations.frequency_data`). ``TensorTableDataset`` gives the samples of a
tensor table's tensors (:mod:`tessera.integrations.tensor_table_data`). ``SplitTrainer`` and
``FrozenFeatureDataset`` train on features of frozen layers computed beside the store
(:mod:`tessera.integrations.split_training`, docs/frozen.md). ``DistributedGroupSampler``
shards any of the datasets across the ranks of a distributed job by the groups of samples
that share stored data, and resumes mid-epoch (:mod:`tessera.integrations.distributed`).
"""

from typing import TYPE_CHECKING, Any

from tessera.integrations.distributed import DistributedGroupSampler
from tessera.integrations.frequency_data import FrequencyDataset, GroupShuffleSampler
from tessera.integrations.torch_data import (
    ArrayDataset,
    RegionDataset,
    Resize,
    regions_from_megadetector,
)

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from tessera.integrations.split_training import FrozenFeatureDataset, SplitTrainer
    from tessera.integrations.tensor_table_data import TensorTableDataset

__all__ = ["ArrayDataset", "DistributedGroupSampler", "FrequencyDataset",
           "FrozenFeatureDataset", "GroupShuffleSampler", "RegionDataset", "Resize",
           "SplitTrainer", "TensorTableDataset",
           "regions_from_megadetector"]


def __getattr__(name: str) -> Any:
    """``TensorTableDataset`` (the ``tables`` extra), ``SplitTrainer`` and
    ``FrozenFeatureDataset`` (the ``frozen`` extra) are imported on first use: the other
    datasets need neither extra."""
    if name == "TensorTableDataset":
        from tessera.integrations.tensor_table_data import TensorTableDataset

        return TensorTableDataset
    if name in ("SplitTrainer", "FrozenFeatureDataset"):
        from tessera.integrations import split_training

        return getattr(split_training, name)
    raise AttributeError(f"module 'tessera.torch' has no attribute {name!r}")
