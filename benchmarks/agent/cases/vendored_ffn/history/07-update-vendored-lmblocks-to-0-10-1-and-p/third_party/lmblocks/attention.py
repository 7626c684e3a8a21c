# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Causal self-attention with grouped-query heads, rotary/ALiBi positions and a KV cache."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .cache import KVCache
from .configuration import LMConfig
from .positional import ALiBi, RotaryEmbedding


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(B, H_kv, T, D)`` -> ``(B, H_kv * n_rep, T, D)`` for grouped-query attention."""
    if n_rep == 1:
        return x
    b, h, t, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)


def causal_mask(q_len: int, k_len: int, device: torch.device) -> torch.Tensor:
    """Boolean ``(q_len, k_len)``, True where attention is allowed (queries are the last q_len keys)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=k_len - q_len)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: LMConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.n_heads = config.n_heads
        self.n_kv_heads = config.kv_heads
        self.head_dim = config.attn_head_dim
        self.use_sdpa = config.use_sdpa
        self.dropout = config.attn_dropout
        self.causal = bool(config.extra.get("causal", True))
        q_dim = self.n_heads * self.head_dim
        kv_dim = self.n_kv_heads * self.head_dim
        self.q_proj = nn.Linear(config.d_model, q_dim, bias=config.bias)
        self.k_proj = nn.Linear(config.d_model, kv_dim, bias=config.bias)
        self.v_proj = nn.Linear(config.d_model, kv_dim, bias=config.bias)
        self.o_proj = nn.Linear(q_dim, config.d_model, bias=config.bias)
        self.o_proj._lmb_residual_out = True  # scaled init (see initialization.py)
        self.resid_drop = nn.Dropout(config.dropout)
        self.rotary = (
            RotaryEmbedding(self.head_dim, config.rotary_pct, config.rotary_base)
            if config.pos_type == "rotary"
            else None
        )
        self.alibi = ALiBi(self.n_heads) if config.pos_type == "alibi" else None

    def _split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """``x: (B, T, d_model)``; ``attention_mask: (B, T_k)`` with 1 for real tokens, 0 for padding."""
        b, t, _ = x.shape
        q = self._split(self.q_proj(x), self.n_heads)
        k = self._split(self.k_proj(x), self.n_kv_heads)
        v = self._split(self.v_proj(x), self.n_kv_heads)
        offset = cache.length if cache is not None else 0
        if self.rotary is not None:
            q, k = self.rotary(q, k, offset=offset)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        k_len = k.shape[-2]

        if self.causal:
            allowed = causal_mask(t, k_len, x.device)[None, None]
        else:
            allowed = torch.ones(1, 1, t, k_len, dtype=torch.bool, device=x.device)
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, None, :k_len].bool()
        bias = None
        if self.alibi is not None:
            bias = self.alibi.bias(t, k_len, x.device)[None].to(q.dtype)

        dropout = self.dropout if self.training else 0.0
        if self.use_sdpa:
            if bias is not None:
                mask = bias.masked_fill(~allowed, float("-inf"))
            elif attention_mask is None and cache is None and self.causal:
                mask = None
            else:
                mask = allowed
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=mask is None)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            if bias is not None:
                scores = scores + bias
            scores = scores.masked_fill(~allowed, float("-inf"))
            probs = F.dropout(scores.softmax(-1), dropout, self.training)
            out = probs @ v
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)
        return self.resid_drop(self.o_proj(out))
