"""ViT-B/16 as torchvision defines it (86,567,656 parameters at 1,000 classes, 224 x 224
input): patches by a 16 x 16 convolution, a class token, 12 encoder layers of width 768 with
12 heads and an MLP of 3,072. Layers: ``conv_proj``, ``patchify`` (to a sequence),
``class_token`` (prepended), ``encoder.pos_embedding`` (added), ``encoder.dropout``,
``encoder.layers.encoder_layer_0..11``, ``encoder.ln``, ``token`` (the class token's
output), ``heads`` (20; the paper's freeze point is ``encoder_layer_11``, layer 17)."""

from __future__ import annotations

import torch
from torch import nn

from tessera.frozen.arch.base import Layer, Staged


class EncoderBlock(nn.Module):
    def __init__(self, heads: int, width: int, mlp: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(width, heads, dropout=dropout,
                                                    batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = nn.LayerNorm(width, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(width, mlp), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(mlp, width), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + self.dropout(y)
        result: torch.Tensor = x + self.mlp(self.ln_2(x))
        return result


class Encoder(nn.Module):
    def __init__(self, length: int, layers: int, heads: int, width: int, mlp: int) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, length, width).normal_(std=0.02))
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.Sequential()
        for i in range(layers):
            self.layers.add_module(f"encoder_layer_{i}", EncoderBlock(heads, width, mlp))
        self.ln = nn.LayerNorm(width, eps=1e-6)


class VisionTransformer(Staged):
    def __init__(self, image: int = 224, patch: int = 16, layers: int = 12, heads: int = 12,
                 width: int = 768, mlp: int = 3072, num_classes: int = 1000) -> None:
        super().__init__()
        self.patch, self.width = patch, width
        self.conv_proj = nn.Conv2d(3, width, kernel_size=patch, stride=patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, width))
        self.encoder = Encoder((image // patch) ** 2 + 1, layers, heads, width, mlp)
        self.heads = nn.Sequential()
        self.heads.add_module("head", nn.Linear(width, num_classes))

    def _patchify(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], self.width, -1).permute(0, 2, 1)

    def _prepend(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)

    def _position(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.encoder.pos_embedding

    def layers(self) -> list[Layer]:
        blocks: list[Layer] = [(f"encoder.layers.{name}", block)
                               for name, block in self.encoder.layers.named_children()]
        return [("conv_proj", self.conv_proj), ("patchify", self._patchify),
                ("class_token", self._prepend), ("encoder.pos_embedding", self._position),
                ("encoder.dropout", self.encoder.dropout), *blocks,
                ("encoder.ln", self.encoder.ln), ("token", lambda x: x[:, 0]),
                ("heads", self.heads)]


def vit_b_16(num_classes: int = 1000) -> VisionTransformer:
    return VisionTransformer(num_classes=num_classes)
