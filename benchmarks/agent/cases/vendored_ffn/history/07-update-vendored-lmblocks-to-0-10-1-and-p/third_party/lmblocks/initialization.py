# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Weight initialisation schemes.

- ``normal``: N(0, init_std) for every linear and embedding weight, zero biases (BERT/GPT-2).
- ``scaled``: as ``normal``, but the output projection of every residual branch (marked with
  ``_lmb_residual_out``) uses ``init_std / sqrt(2 * n_layers)`` (GPT-2 paper, section 2.3).
- ``small``: ``sqrt(2 / (5 * d_model))`` everywhere (Nguyen & Salazar, "Transformers without Tears").
- ``mitchell``: truncated normal with ``1/sqrt(fan_in)``, residual outputs further divided by
  ``sqrt(2 * (layer + 1))`` (OLMo's "mitchell" init).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .configuration import LMConfig


def _is_residual_out(module: nn.Module) -> bool:
    return bool(getattr(module, "_lmb_residual_out", False))


def _layer_index(name: str) -> int:
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part == "blocks" and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return 0


@torch.no_grad()
def init_weights(model: nn.Module, config: LMConfig) -> None:
    scheme, std = config.init_scheme, config.init_std
    small = math.sqrt(2.0 / (5 * config.d_model))
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            if scheme == "small":
                nn.init.normal_(module.weight, std=small)
            elif scheme == "mitchell":
                s = 1.0 / math.sqrt(module.in_features)
                if _is_residual_out(module):
                    s /= math.sqrt(2.0 * (_layer_index(name) + 1))
                nn.init.trunc_normal_(module.weight, std=s, a=-3 * s, b=3 * s)
            else:
                s = std / math.sqrt(2 * config.n_layers) if scheme == "scaled" and _is_residual_out(module) else std
                nn.init.normal_(module.weight, std=s)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=small if scheme == "small" else std)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
    for name, param in model.named_parameters():
        if name.endswith("pos_emb.weight"):
            nn.init.normal_(param, std=0.01)
