"""PatchTST-style forecaster (Nie et al., 2023): channel-independent patch tokens, a transformer
encoder, and a flatten head that maps all tokens of a channel to its forecast horizon."""

from __future__ import annotations

import torch
from torch import nn

from patchcast.config import ModelConfig
from patchcast.models.blocks import TransformerBlock, make_norm
from patchcast.models.layers import PatchEmbedding, Patcher, RevIN, SeriesDecomposition, build_positional, n_patches
from patchcast.registry import MODELS


class FlattenHead(nn.Module):
    def __init__(self, n_tokens: int, d_model: int, horizon: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.flatten = nn.Flatten(start_dim=-2)
        self.drop = nn.Dropout(dropout)
        self.linear = nn.Linear(n_tokens * d_model, horizon)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.linear(self.drop(self.flatten(tokens)))


class PatchEncoder(nn.Module):
    """Univariate series ``(B, L)`` -> tokens ``(B, N, D)``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_tokens = n_patches(cfg.lookback, cfg.patch_len, cfg.stride)
        self.patcher = Patcher(cfg.patch_len, cfg.stride)
        self.embed = PatchEmbedding(cfg.patch_len, cfg.d_model, cfg.dropout)
        self.pos = build_positional(cfg.extra.get("positional", "learned"), self.n_tokens, cfg.d_model)
        drop_path = float(cfg.extra.get("drop_path", 0.0))
        self.blocks = nn.ModuleList(
            TransformerBlock(
                cfg.d_model,
                cfg.n_heads,
                cfg.d_ff,
                dropout=cfg.dropout,
                attn_dropout=cfg.attn_dropout,
                norm=cfg.norm,
                pre_norm=cfg.pre_norm,
                use_attention=cfg.use_attention,
                drop_path=drop_path * i / max(cfg.n_layers - 1, 1),
                attn_inner_dim=cfg.extra.get("attn_inner_dim"),
            )
            for i in range(cfg.n_layers)
        )
        self.norm = make_norm(cfg.norm, cfg.d_model) if cfg.pre_norm else nn.Identity()

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        tokens = self.pos(self.embed(self.patcher(series)))
        for block in self.blocks:
            tokens = block(tokens)
        return self.norm(tokens)


@MODELS.register("patchtst")
class PatchTST(nn.Module):
    def __init__(self, cfg: ModelConfig, n_channels: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.n_channels = n_channels
        self.revin = RevIN(n_channels) if cfg.revin else None
        self.decomp = SeriesDecomposition(cfg.decomposition_kernel) if cfg.decomposition else None
        self.encoder = PatchEncoder(cfg)
        self.head = FlattenHead(self.encoder.n_tokens, cfg.d_model, cfg.horizon, cfg.head_dropout)
        # with decomposition, the trend goes through a linear map (as in DLinear)
        self.trend_head = nn.Linear(cfg.lookback, cfg.horizon) if cfg.decomposition else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x: (B, lookback, C)`` -> ``(B, horizon, C)``."""
        if x.dim() != 3 or x.shape[1] != self.cfg.lookback:
            raise ValueError(f"expected (B, {self.cfg.lookback}, C), got {tuple(x.shape)}")
        if self.revin is not None:
            x = self.revin.normalize(x)
        trend = None
        if self.decomp is not None:
            x, trend = self.decomp(x)
        b, length, c = x.shape
        series = x.permute(0, 2, 1).reshape(b * c, length)
        y = self.head(self.encoder(series))
        if trend is not None and self.trend_head is not None:
            y = y + self.trend_head(trend.permute(0, 2, 1).reshape(b * c, length))
        y = y.reshape(b, c, -1).permute(0, 2, 1)
        if self.revin is not None:
            y = self.revin.denormalize(y)
        return y
