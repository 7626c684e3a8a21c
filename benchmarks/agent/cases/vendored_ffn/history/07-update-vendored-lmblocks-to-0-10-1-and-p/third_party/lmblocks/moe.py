# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Mixture-of-experts feed-forward block with a top-k router (Switch/Mixtral style).

Enable with ``ffn_type="mlp"`` and ``extra={"moe_experts": 8, "moe_top_k": 2}``. The router's
load-balancing loss (Fedus et al., 2021) is stored on the module after each forward as
``aux_loss``; ``TransformerLM`` does not add it to the loss by itself, collect it with
``moe_aux_loss(model)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configuration import LMConfig
from .feedforward import MLP


class TopKRouter(nn.Module):
    def __init__(self, d_model: int, n_experts: int, top_k: int, jitter: float = 0.0) -> None:
        super().__init__()
        if not 1 <= top_k <= n_experts:
            raise ValueError(f"top_k {top_k} must be in [1, {n_experts}]")
        self.gate = nn.Linear(d_model, n_experts, bias=False)
        self.n_experts = n_experts
        self.top_k = top_k
        self.jitter = jitter

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x: (N, d)`` -> weights ``(N, k)``, expert ids ``(N, k)``, router probabilities ``(N, E)``."""
        if self.training and self.jitter > 0:
            x = x * torch.empty_like(x).uniform_(1 - self.jitter, 1 + self.jitter)
        probs = self.gate(x).float().softmax(-1)
        weights, experts = probs.topk(self.top_k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        return weights.to(x.dtype), experts, probs


class MoEFeedForward(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        n_experts = int(config.extra.get("moe_experts", 8))
        top_k = int(config.extra.get("moe_top_k", 2))
        self.router = TopKRouter(config.d_model, n_experts, top_k, float(config.extra.get("moe_jitter", 0.0)))
        self.experts = nn.ModuleList(MLP(config) for _ in range(n_experts))
        self.aux_loss: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        weights, experts, probs = self.router(flat)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = (experts == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        # load balancing: fraction of tokens routed to each expert x mean router probability
        counts = F.one_hot(experts[:, 0], self.router.n_experts).float().mean(0)
        self.aux_loss = self.router.n_experts * (counts * probs.mean(0)).sum()
        return out.reshape(shape)


def moe_aux_loss(model: nn.Module) -> torch.Tensor:
    losses = [m.aux_loss for m in model.modules() if isinstance(m, MoEFeedForward) and m.aux_loss is not None]
    if not losses:
        return torch.zeros(())
    return torch.stack(losses).mean()
