"""VGG11 and VGG19 (without batch norm) as torchvision defines them (132,863,336 and
143,667,240 parameters at 1,000 classes): ``features.i`` (convolutions, ReLUs, pools),
``avgpool``, ``flatten``, ``classifier.0..6``; 30 and 46 layers."""

from __future__ import annotations

from torch import nn

from tessera.frozen.arch.base import Layer, Staged, children_of, flatten

#: torchvision's configurations: channels, "M" = max pool.
CONFIGS: dict[str, list[int | str]] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
          512, 512, 512, 512, "M"],
}


class VGG(Staged):
    def __init__(self, config: str, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        modules: list[nn.Module] = []
        channels = 3
        for item in CONFIGS[config]:
            if item == "M":
                modules.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                assert isinstance(item, int)
                modules += [nn.Conv2d(channels, item, kernel_size=3, padding=1),
                            nn.ReLU(inplace=True)]
                channels = item
        self.features = nn.Sequential(*modules)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes))
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.constant_(m.bias, 0)

    def layers(self) -> list[Layer]:
        return [*children_of("features", self.features), ("avgpool", self.avgpool),
                ("flatten", flatten), *children_of("classifier", self.classifier)]


def vgg11(num_classes: int = 1000) -> VGG:
    return VGG("A", num_classes)


def vgg19(num_classes: int = 1000) -> VGG:
    return VGG("E", num_classes)
