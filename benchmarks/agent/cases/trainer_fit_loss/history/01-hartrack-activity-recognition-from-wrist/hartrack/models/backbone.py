"""1-D convolutional backbones for IMU windows ``(B, C, T)`` -> feature maps ``(B, D, T')``."""

from __future__ import annotations

import torch
from torch import nn


class ConvBNAct(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__(
            nn.Conv1d(c_in, c_out, kernel, stride, padding=kernel // 2, groups=groups, bias=False),
            nn.BatchNorm1d(c_out),
            nn.GELU(),
        )


class ResBlock1d(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int = 1, kernel: int = 7, dropout: float = 0.0) -> None:
        super().__init__()
        self.conv1 = ConvBNAct(c_in, c_out, kernel, stride)
        self.conv2 = nn.Sequential(
            nn.Conv1d(c_out, c_out, kernel, padding=kernel // 2, bias=False), nn.BatchNorm1d(c_out)
        )
        self.drop = nn.Dropout(dropout)
        self.skip = (
            nn.Identity()
            if stride == 1 and c_in == c_out
            else nn.Sequential(nn.Conv1d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm1d(c_out))
        )
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.skip(x) + self.drop(self.conv2(self.conv1(x))))


class ResNet1d(nn.Module):
    def __init__(
        self, in_channels: int = 6, widths: tuple[int, ...] = (32, 64, 96), kernel: int = 7, dropout: float = 0.1
    ) -> None:
        super().__init__()
        self.stem = ConvBNAct(in_channels, widths[0], kernel)
        stages = []
        c = widths[0]
        for i, w in enumerate(widths):
            stages.append(ResBlock1d(c, w, stride=1 if i == 0 else 2, kernel=kernel, dropout=dropout))
            c = w
        self.stages = nn.Sequential(*stages)
        self.out_channels = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(self.stem(x))


class TinyCNN(nn.Module):
    """Three plain conv layers: a fast baseline for ablations."""

    def __init__(self, in_channels: int = 6, width: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(
            ConvBNAct(in_channels, width, 9), ConvBNAct(width, width, 9, 2), ConvBNAct(width, width, 9, 2)
        )
        self.out_channels = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_backbone(name: str, in_channels: int, **kwargs) -> nn.Module:
    if name == "resnet1d":
        return ResNet1d(in_channels, **kwargs)
    if name == "tinycnn":
        return TinyCNN(in_channels, **kwargs)
    raise ValueError(f"unknown backbone {name!r} (resnet1d, tinycnn)")
