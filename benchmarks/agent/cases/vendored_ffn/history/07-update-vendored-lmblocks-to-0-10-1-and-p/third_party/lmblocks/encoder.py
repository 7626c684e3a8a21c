# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Bidirectional encoder with a masked-language-modelling head (BERT-style), from the same blocks.

    config = LMConfig(vocab_size=V, d_model=256, n_layers=6, n_heads=8)
    encoder = TransformerEncoder(config)            # attention is made non-causal
    out = encoder(input_ids, labels=mlm_labels)     # labels: -100 except at masked positions
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import TransformerBlock
from .configuration import LMConfig
from .initialization import init_weights
from .modeling import LMOutput
from .normalization import build_norm
from .positional import build_absolute_positions


class TransformerEncoder(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        config = dataclasses.replace(config, extra={**config.extra, "causal": False})
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.pos_emb = build_absolute_positions(config.pos_type, config.max_seq_len, config.d_model)
        self.blocks = nn.ModuleList(TransformerBlock(config, i) for i in range(config.n_layers))
        self.norm_out = build_norm(config.norm_type, config.d_model, config.norm_eps, config.bias)
        self.mlm_transform = nn.Sequential(nn.Linear(config.d_model, config.d_model), nn.GELU())
        self.mlm_norm = build_norm(config.norm_type, config.d_model, config.norm_eps, config.bias)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        init_weights(self, config)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.tok_emb(input_ids)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(input_ids.shape[1], device=input_ids.device))[None]
        for block in self.blocks:
            x = block(x, attention_mask)
        return self.norm_out(x)

    def forward(
        self, input_ids: torch.Tensor, labels: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None
    ) -> LMOutput:
        hidden = self.encode(input_ids, attention_mask)
        h = self.mlm_norm(self.mlm_transform(hidden))
        logits = F.linear(h, self.tok_emb.weight, self.mlm_bias)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)
        return LMOutput(logits=logits, loss=loss)


def mask_tokens(
    input_ids: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    prob: float = 0.15,
    generator: torch.Generator | None = None,
    special_ids: tuple[int, ...] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: of the selected ``prob`` of tokens, 80 % -> mask, 10 % -> random, 10 % kept."""
    labels = input_ids.clone()
    chosen = torch.rand(input_ids.shape, generator=generator) < prob
    for special in special_ids:
        chosen &= input_ids != special
    labels[~chosen] = -100
    inputs = input_ids.clone()
    roll = torch.rand(input_ids.shape, generator=generator)
    inputs[chosen & (roll < 0.8)] = mask_id
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    swap = chosen & (roll >= 0.8) & (roll < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, labels
