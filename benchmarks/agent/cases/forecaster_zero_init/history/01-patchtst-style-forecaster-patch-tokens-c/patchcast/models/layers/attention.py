"""Multi-head self-attention over patch tokens.

``qkv`` computes queries, keys and values in one matmul; ``proj`` maps the concatenated heads back
to the model width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(
        self, d_model: int, n_heads: int, attn_dropout: float = 0.0, proj_dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = attn_dropout
        self.proj_drop = nn.Dropout(proj_dropout)
        self.keep_attention = False
        self._last_attn: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, N, Dh)
        if self.keep_attention:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            attn = scores.softmax(-1)
            self._last_attn = attn.detach()
            out = F.dropout(attn, self.attn_dropout, self.training) @ v
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.attn_dropout if self.training else 0.0
            )
        out = out.transpose(1, 2).reshape(b, n, d)
        return self.proj_drop(self.proj(out))

    @property
    def last_attention(self) -> torch.Tensor | None:
        """Attention weights of the last forward when ``keep_attention`` is set (for plots)."""
        return self._last_attn
