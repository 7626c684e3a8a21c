# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Weight-only int8 quantisation of linear layers for inference (per-output-channel absmax)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Int8Linear(nn.Module):
    def __init__(self, weight_q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.register_buffer("weight_q", weight_q)
        self.register_buffer("scale", scale)
        self.bias = nn.Parameter(bias, requires_grad=False) if bias is not None else None
        self.in_features = weight_q.shape[1]
        self.out_features = weight_q.shape[0]

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "Int8Linear":
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-8) / 127.0
        q = torch.round(w / scale).clamp(-127, 127).to(torch.int8)
        bias = linear.bias.detach().clone() if linear.bias is not None else None
        return cls(q, scale.squeeze(1), bias)

    def dequantize(self) -> torch.Tensor:
        return self.weight_q.float() * self.scale[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantize().to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_int8(model: nn.Module, skip: tuple[str, ...] = ("lm_head",)) -> list[str]:
    """Replace every ``nn.Linear`` (except names containing one of ``skip``) in place."""
    replaced = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not any(s in full for s in skip):
                setattr(module, child_name, Int8Linear.from_linear(child))
                replaced.append(full)
    return replaced


def quantization_error(model_fp: nn.Module, model_q: nn.Module, input_ids: torch.Tensor) -> float:
    """Max absolute difference of the logits, a quick sanity check after quantising."""
    with torch.no_grad():
        a = model_fp(input_ids).logits
        b = model_q(input_ids).logits
    return (a - b).abs().max().item()
