"""DenseNet121 as torchvision defines it (7,978,856 parameters at 1,000 classes): growth 32,
blocks of 6, 12, 24, 16 layers, bottleneck 4 x growth, compression 0.5. Layers, a dense block
being one: ``features.conv0, norm0, relu0, pool0, denseblock1, transition1.norm, .relu,
.conv, .pool, denseblock2, ..., denseblock4, features.norm5, classifier`` (22; the last one
also applies the final ReLU, pooling and flattening)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tessera.frozen.arch.base import Layer, Staged


class DenseLayer(nn.Module):
    def __init__(self, inputs: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(inputs)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(inputs, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        out = self.conv1(self.relu1(self.norm1(torch.cat(features, 1))))
        result: torch.Tensor = self.conv2(self.relu2(self.norm2(out)))
        return result


class DenseBlock(nn.ModuleDict):
    def __init__(self, count: int, inputs: int, growth: int, bn_size: int) -> None:
        super().__init__()
        for i in range(count):
            self.add_module(f"denselayer{i + 1}", DenseLayer(inputs + i * growth, growth,
                                                             bn_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    def __init__(self, inputs: int, outputs: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(inputs)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(inputs, outputs, 1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(Staged):
    def __init__(self, growth: int = 32, blocks: tuple[int, ...] = (6, 12, 24, 16),
                 init_features: int = 64, bn_size: int = 4, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential()
        self.features.add_module("conv0", nn.Conv2d(3, init_features, 7, 2, 3, bias=False))
        self.features.add_module("norm0", nn.BatchNorm2d(init_features))
        self.features.add_module("relu0", nn.ReLU(inplace=True))
        self.features.add_module("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        channels = init_features
        for i, count in enumerate(blocks):
            self.features.add_module(f"denseblock{i + 1}",
                                     DenseBlock(count, channels, growth, bn_size))
            channels += count * growth
            if i != len(blocks) - 1:
                self.features.add_module(f"transition{i + 1}",
                                         Transition(channels, channels // 2))
                channels //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(channels))
        self.classifier = nn.Linear(channels, num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        out = F.adaptive_avg_pool2d(F.relu(x), (1, 1))
        result: torch.Tensor = self.classifier(torch.flatten(out, 1))
        return result

    def layers(self) -> list[Layer]:
        out: list[Layer] = []
        for name, module in self.features.named_children():
            if isinstance(module, Transition):
                out += [(f"features.{name}.{part}", sub)
                        for part, sub in module.named_children()]
            else:
                out.append((f"features.{name}", module))
        return [*out, ("classifier", self._head)]


def densenet121(num_classes: int = 1000) -> DenseNet:
    return DenseNet(num_classes=num_classes)
