# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Position-wise feed-forward blocks: the plain two-layer MLP and gated linear units (GLU variants,
Shazeer 2020)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .activations import Activation
from .configuration import LMConfig

GATE_ACTIVATIONS = {"swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu}


class MLP(nn.Module):
    """``fc_out(act(fc_in(x)))`` with dropout on the output."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        hidden = config.ffn_hidden
        self.fc_in = nn.Linear(config.d_model, hidden, bias=config.bias)
        self.act = Activation(config.activation)
        self.fc_out = nn.Linear(hidden, config.d_model, bias=config.bias)
        self.fc_out._lmb_residual_out = True
        self.drop = nn.Dropout(config.dropout)

    def hidden_states(self, x: torch.Tensor) -> torch.Tensor:
        """The activations of the hidden layer (for probing / sparsity statistics)."""
        return self.act(self.fc_in(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc_out(self.hidden_states(x)))


class GatedFFN(nn.Module):
    """``down_proj(act(gate_proj(x)) * up_proj(x))``."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        hidden = config.ffn_hidden
        self.gate_proj = nn.Linear(config.d_model, hidden, bias=config.bias)
        self.up_proj = nn.Linear(config.d_model, hidden, bias=config.bias)
        self.down_proj = nn.Linear(hidden, config.d_model, bias=config.bias)
        self.down_proj._lmb_residual_out = True
        self.gate_act = GATE_ACTIVATIONS[config.ffn_type]
        self.drop = nn.Dropout(config.dropout)

    def hidden_states(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate_act(self.gate_proj(x)) * self.up_proj(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.down_proj(self.hidden_states(x)))


FEEDFORWARD_CLASSES: tuple[type[nn.Module], ...] = (MLP, GatedFFN)


def build_feedforward(config: LMConfig) -> nn.Module:
    if config.extra.get("moe_experts"):
        from .moe import MoEFeedForward

        return MoEFeedForward(config)
    if config.ffn_type == "mlp":
        return MLP(config)
    if config.ffn_type in GATE_ACTIVATIONS:
        return GatedFFN(config)
    raise ValueError(f"unknown ffn_type {config.ffn_type!r}")
