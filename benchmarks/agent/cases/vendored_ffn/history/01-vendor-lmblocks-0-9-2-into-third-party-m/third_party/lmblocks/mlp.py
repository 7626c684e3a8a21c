# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Position-wise feed-forward block (GPT-2 MLP)."""

from __future__ import annotations

import torch
from torch import nn

from .activations import Activation
from .configuration import LMConfig


class MLP(nn.Module):
    """``c_proj(act(c_fc(x)))`` with dropout on the output."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, config.mlp_hidden, bias=config.bias)
        self.act = Activation(config.activation)
        self.c_proj = nn.Linear(config.mlp_hidden, config.d_model, bias=config.bias)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.c_proj(self.act(self.c_fc(x))))
