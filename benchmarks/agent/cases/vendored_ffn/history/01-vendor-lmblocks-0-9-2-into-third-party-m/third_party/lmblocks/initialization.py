# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Weight initialisation schemes.

- ``normal``: N(0, init_std) for every linear and embedding weight, zero biases (BERT/GPT-2).
- ``scaled``: as ``normal``, but the output projection of every residual branch (``c_proj``)
  uses ``init_std / sqrt(2 * n_layers)`` (GPT-2 paper, section 2.3).
- ``small``: ``sqrt(2 / (5 * d_model))`` everywhere (Nguyen & Salazar, "Transformers without Tears").
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .configuration import LMConfig


def _is_residual_out(name: str) -> bool:
    return name.endswith("c_proj")


@torch.no_grad()
def init_weights(model: nn.Module, config: LMConfig) -> None:
    scheme, std = config.init_scheme, config.init_std
    small = math.sqrt(2.0 / (5 * config.d_model))
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            if scheme == "small":
                nn.init.normal_(module.weight, std=small)
            else:
                s = std / math.sqrt(2 * config.n_layers) if scheme == "scaled" and _is_residual_out(name) else std
                nn.init.normal_(module.weight, std=s)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=small if scheme == "small" else std)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
    for name, param in model.named_parameters():
        if name.endswith("wpe.weight"):
            nn.init.normal_(param, std=0.01)
