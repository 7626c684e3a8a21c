# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Decoder-only language model built from ``TransformerBlock``s."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import TransformerBlock
from .cache import KVCache
from .configuration import LMConfig
from .initialization import init_weights
from .normalization import build_norm
from .positional import build_absolute_positions


@dataclass
class LMOutput:
    logits: torch.Tensor
    loss: torch.Tensor | None = None
    hidden_states: list[torch.Tensor] | None = None


class TransformerLM(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.pos_emb = build_absolute_positions(config.pos_type, config.max_seq_len, config.d_model)
        self.emb_drop = nn.Dropout(config.emb_dropout)
        self.blocks = nn.ModuleList(TransformerBlock(config, i) for i in range(config.n_layers))
        self.norm_out = build_norm(config.norm_type, config.d_model, config.norm_eps, config.bias)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        self.gradient_checkpointing = False
        init_weights(self, config)

    # ------------------------------------------------------------------ helpers
    def get_input_embeddings(self) -> nn.Embedding:
        return self.tok_emb

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        seen: set[int] = set()
        total = 0
        for name, p in self.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            if exclude_embeddings and ("tok_emb" in name or "pos_emb" in name):
                continue
            total += p.numel()
        return total

    def resize_token_embeddings(self, vocab_size: int) -> None:
        old = self.tok_emb
        new = nn.Embedding(vocab_size, old.embedding_dim, padding_idx=old.padding_idx).to(old.weight.device)
        nn.init.normal_(new.weight, std=self.config.init_std)
        n = min(vocab_size, old.num_embeddings)
        with torch.no_grad():
            new.weight[:n] = old.weight[:n]
        self.tok_emb = new
        self.lm_head = nn.Linear(old.embedding_dim, vocab_size, bias=False).to(old.weight.device)
        if self.config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        self.config = self.config.replace(vocab_size=vocab_size)

    # ------------------------------------------------------------------ forward
    def embed(self, input_ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = self.tok_emb(input_ids)
        if self.pos_emb is not None:
            positions = torch.arange(offset, offset + input_ids.shape[1], device=input_ids.device)
            x = x + self.pos_emb(positions)[None]
        return self.emb_drop(x)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        output_hidden_states: bool = False,
        ignore_index: int = -100,
    ) -> LMOutput:
        """``labels`` are the next tokens already aligned with ``input_ids`` (no internal shift)."""
        if input_ids.shape[1] + (cache.length if cache else 0) > self.config.max_seq_len:
            raise ValueError(f"sequence longer than max_seq_len {self.config.max_seq_len}")
        x = self.embed(input_ids, offset=cache.length if cache else 0)
        hidden = [x] if output_hidden_states else None
        for block in self.blocks:
            if self.gradient_checkpointing and self.training and cache is None:
                from .checkpointing import checkpoint_block

                x = checkpoint_block(block, x, attention_mask)
            else:
                x = block(x, attention_mask, cache)
            if hidden is not None:
                hidden.append(x)
        if cache is not None:
            cache.advance(input_ids.shape[1])
        logits = self.lm_head(self.norm_out(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=ignore_index
            )
        return LMOutput(logits=logits, loss=loss, hidden_states=hidden)

    def new_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        c = self.config
        p = next(self.parameters())
        return KVCache(c.n_layers, batch_size, c.kv_heads, c.attn_head_dim, max_len or c.max_seq_len, p.device, p.dtype)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, **sampling) -> torch.Tensor:
        from .generation import generate

        return generate(self, input_ids, max_new_tokens, **sampling)
