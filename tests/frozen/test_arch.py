"""The architectures of frozen-layer pushdown: parameter counts and layer inventories equal
torchvision's definitions and the spec's table (section 2.2), output sizes per layer at
224 x 224 (a meta-device forward: no compute), torchvision's parameter names, and a split
forward pass equal to the whole one."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tessera.errors import InvalidArgumentError  # noqa: E402
from tessera.frozen.arch import ARCHS, build  # noqa: E402

# name: (parameters, layers, {1-based layer: (name, KiB per sample of its output)})
EXPECTED = {
    "alexnet": (61_100_840, 22, {3: ("features.2", 182), 17: ("classifier.1", 16),
                                 22: ("classifier.6", 3.9)}),
    "resnet18": (11_689_512, 14, {4: ("maxpool", 784), 11: ("layer4.0", 98),
                                  13: ("avgpool", 2)}),
    "resnet50": (25_557_032, 22, {7: ("layer1.2", 3136), 21: ("avgpool", 8)}),
    "vgg11": (132_863_336, 30, {21: ("features.20", 98), 27: ("classifier.3", 16)}),
    "vgg19": (143_667_240, 46, {36: ("features.35", 392), 37: ("features.36", 98)}),
    "densenet121": (7_978_856, 22, {9: ("features.transition1.pool", 392),
                                    19: ("features.transition3.pool", 98),
                                    20: ("features.denseblock4", 196), 22: ("classifier", 3.9)}),
    "vit_b_16": (86_567_656, 20, {1: ("conv_proj", 588),
                                  17: ("encoder.layers.encoder_layer_11", 591),
                                  19: ("token", 3), 20: ("heads", 3.9)}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameters_inventory_and_output_sizes(name: str) -> None:
    params, count, layers = EXPECTED[name]
    with torch.device("meta"):
        model = build(name).eval()
    assert sum(p.numel() for p in model.parameters()) == params
    inventory = model.inventory()
    assert len(inventory) == count
    x = torch.empty(1, 3, 224, 224, device="meta")
    for s, (layer, kib) in layers.items():
        assert inventory[s - 1] == layer and model.index(layer) == s
        out = model.forward_to(x, s)
        assert round(out.numel() * 4 / 1024, 1) == pytest.approx(kib, abs=0.5), (name, s)


def test_torchvision_parameter_names() -> None:
    with torch.device("meta"):
        keys = {n: set(build(n).state_dict()) for n in ("alexnet", "resnet18", "resnet50",
                                                          "vgg11", "densenet121", "vit_b_16")}
    assert {"features.10.weight", "classifier.4.weight", "classifier.6.bias"} <= keys["alexnet"]
    assert {"conv1.weight", "bn1.running_mean", "layer2.0.downsample.0.weight",
            "layer2.0.downsample.1.num_batches_tracked", "layer4.1.bn2.bias",
            "fc.weight"} <= keys["resnet18"]
    assert {"layer1.0.conv3.weight", "layer3.5.bn3.running_var"} <= keys["resnet50"]
    assert {"features.0.weight", "features.18.bias", "classifier.6.weight"} <= keys["vgg11"]
    assert {"features.conv0.weight", "features.denseblock1.denselayer1.norm1.running_mean",
            "features.denseblock4.denselayer16.conv2.weight", "features.transition3.conv.weight",
            "features.norm5.bias", "classifier.weight"} <= keys["densenet121"]
    assert {"conv_proj.weight", "class_token", "encoder.pos_embedding",
            "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
            "encoder.layers.encoder_layer_11.mlp.3.bias", "encoder.ln.weight",
            "heads.head.weight"} <= keys["vit_b_16"]


@pytest.mark.parametrize("name", ["alexnet", "resnet18", "densenet121", "vit_b_16"])
def test_a_split_forward_equals_the_whole(name: str) -> None:
    torch.manual_seed(0)
    model = build(name, num_classes=10).eval()
    x = torch.rand(1, 3, 224, 224) if name == "vit_b_16" else torch.rand(2, 3, 64, 64)
    with torch.inference_mode():
        whole = model(x)
        for s in (1, 4, len(model.inventory()) - 1):
            assert torch.allclose(model.forward_from(model.forward_to(x, s), s), whole,
                                  atol=1e-5)


def test_bad_names_and_splits() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown architecture 'resnet19'"):
        build("resnet19")
    model = build("resnet18", num_classes=2)
    with pytest.raises(InvalidArgumentError, match=r"a split must be 0\.\.14"):
        model.forward_to(torch.zeros(1, 3, 32, 32), 15)
    with pytest.raises(InvalidArgumentError, match=r"no layer 'layer5\.0'"):
        model.index("layer5.0")
    assert sorted(ARCHS) == sorted(EXPECTED)
