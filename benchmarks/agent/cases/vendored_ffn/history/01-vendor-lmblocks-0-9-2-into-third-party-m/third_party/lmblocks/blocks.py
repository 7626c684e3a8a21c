# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Transformer block: attention and MLP sublayers with residual connections (pre- or post-norm)."""

from __future__ import annotations

import torch
from torch import nn

from .attention import CausalSelfAttention
from .cache import KVCache
from .configuration import LMConfig
from .mlp import MLP
from .normalization import build_norm


class TransformerBlock(nn.Module):
    def __init__(self, config: LMConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.pre_norm = config.pre_norm
        self.ln_1 = build_norm(config.norm_type, config.d_model, config.norm_eps, config.bias)
        self.attn = CausalSelfAttention(config, layer_idx)
        self.ln_2 = build_norm(config.norm_type, config.d_model, config.norm_eps, config.bias)
        self.mlp = MLP(config)

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attn(self.ln_1(x), attention_mask, cache)
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x, attention_mask, cache))
        return self.ln_2(x + self.mlp(x))
