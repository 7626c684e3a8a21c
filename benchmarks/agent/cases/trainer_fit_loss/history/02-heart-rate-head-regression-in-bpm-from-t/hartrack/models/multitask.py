"""Activity classification + heart-rate regression from one shared backbone."""

from __future__ import annotations

import torch
from torch import nn

from hartrack.models.backbone import build_backbone
from hartrack.models.heads import ClassificationHead, RegressionHead, build_pool


class MultiTaskNet(nn.Module):
    def __init__(
        self,
        n_classes: int,
        in_channels: int = 6,
        backbone: str = "resnet1d",
        backbone_args: dict | None = None,
        pool: str = "attention",
        hr_init: float = 0.0,
        tasks: tuple[str, ...] = ("activity", "hr"),
    ) -> None:
        super().__init__()
        self.tasks = tasks
        self.backbone = build_backbone(backbone, in_channels, **(backbone_args or {}))
        self.pool, features = build_pool(pool, self.backbone.out_channels)
        self.activity_head = ClassificationHead(features, n_classes) if "activity" in tasks else None
        self.hr_head = RegressionHead(features, init_bias=hr_init) if "hr" in tasks else None

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        z = self.pool(self.backbone(x)).flatten(1)
        out = {"features": z}
        if self.activity_head is not None:
            out["logits"] = self.activity_head(z)
        if self.hr_head is not None:
            out["hr"] = self.hr_head(z)
        return out


def build_model(cfg, n_classes: int, hr_mean: float) -> MultiTaskNet:
    m = cfg.model
    return MultiTaskNet(
        n_classes=n_classes,
        backbone=m.backbone,
        backbone_args=m.backbone_args,
        pool=m.pool,
        hr_init=hr_mean if m.hr_bias_init else 0.0,
        tasks=tuple(m.tasks),
    )
