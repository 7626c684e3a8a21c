"""Transformer encoder block over patch tokens (pre- or post-norm)."""

from __future__ import annotations

import torch
from torch import nn

from patchcast.models.layers import MLP, MultiHeadAttention


class BatchNormTokens(nn.Module):
    """BatchNorm over the feature axis of ``(B, N, D)`` tokens, as PatchTST uses instead of LayerNorm."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x.transpose(1, 2)).transpose(1, 2)


def make_norm(kind: str, d_model: int) -> nn.Module:
    if kind == "layer":
        return nn.LayerNorm(d_model)
    if kind == "batch":
        return BatchNormTokens(d_model)
    raise ValueError(f"unknown norm {kind!r} (layer, batch)")


class DropPath(nn.Module):
    """Stochastic depth: drop the whole residual branch for a random subset of samples."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.rand(x.shape[0], *([1] * (x.dim() - 1)), device=x.device) >= self.p
        return x * keep / (1 - self.p)


class TransformerBlock(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        norm: str = "layer",
        pre_norm: bool = True,
        use_attention: bool = True,
        drop_path: float = 0.0,
        attn_inner_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.attn = (
            MultiHeadAttention(d_model, n_heads, attn_dropout, dropout, inner_dim=attn_inner_dim)
            if use_attention
            else None
        )
        self.norm1 = make_norm(norm, d_model) if use_attention else nn.Identity()
        self.mlp = MLP(d_model, d_ff, dropout)
        self.norm2 = make_norm(norm, d_model)
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.attn is not None:
            if self.pre_norm:
                x = x + self.drop_path(self.attn(self.norm1(x)))
            else:
                x = self.norm1(x + self.drop_path(self.attn(x)))
        if self.pre_norm:
            x = x + self.drop_path(self.mlp(self.norm2(x)))
        else:
            x = self.norm2(x + self.drop_path(self.mlp(x)))
        return x
