"""AlexNet as torchvision defines it (61,100,840 parameters at 1,000 classes), 22 layers:
``features.0..12``, ``avgpool``, ``flatten``, ``classifier.0..6`` (the paper's freeze point,
layer 17, is ``classifier.1``)."""

from __future__ import annotations

from torch import nn

from tessera.frozen.arch.base import Layer, Staged, children_of, flatten


class AlexNet(Staged):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes))

    def layers(self) -> list[Layer]:
        return [*children_of("features", self.features), ("avgpool", self.avgpool),
                ("flatten", flatten), *children_of("classifier", self.classifier)]


def alexnet(num_classes: int = 1000) -> AlexNet:
    return AlexNet(num_classes)
