"""Weight initialisation: truncated normal for linear layers, as in ViT/PatchTST."""

from __future__ import annotations

from torch import nn


def init_weights(model: nn.Module, std: float = 0.02) -> None:
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

