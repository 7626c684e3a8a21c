"""Weight initialisation.

``init_weights`` applies a truncated-normal init to every linear layer. ``zero_init_`` then sets the
weights of selected modules to zero: zeroing the last projection of each residual branch makes
every block start as the identity (ReZero / "zero-init residual", Goyal et al. 2017; Bachlechner et
al. 2020), which lets deeper stacks train at a higher learning rate.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn


def init_weights(model: nn.Module, std: float = 0.02) -> None:
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.LayerNorm, nn.BatchNorm1d)):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


def zero_init_(model: nn.Module, patterns: Iterable[str]) -> list[str]:
    """Zero the weight and bias of every linear layer whose name matches one of ``patterns``.

    Patterns are given without the block index (``mlp.fc2`` matches ``blocks.0.mlp.fc2``,
    ``blocks.1.mlp.fc2``, ...). Returns the names of the modules that were zeroed.
    """
    patterns = [p for p in patterns if p]
    matched: list[str] = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and any(p in name for p in patterns):
            nn.init.zeros_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
            matched.append(name)
    if patterns and not matched:
        raise ValueError(f"zero_init patterns {patterns} matched no linear layer")
    return matched
