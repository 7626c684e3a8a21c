# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Autoregressive sampling with a KV cache: greedy, temperature, top-k, top-p (nucleus), min-p,
repetition penalty, stop tokens."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class SamplingConfig:
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float = 1.0
    stop_token_id: int | None = None
    greedy: bool = False
    seed: int | None = None

    def validate(self) -> None:
        if self.temperature <= 0 and not self.greedy:
            raise ValueError("temperature must be > 0 (or use greedy=True)")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError("top_k must be >= 1")
        if self.repetition_penalty <= 0:
            raise ValueError("repetition_penalty must be > 0")


def apply_repetition_penalty(logits: torch.Tensor, tokens: torch.Tensor, penalty: float) -> torch.Tensor:
    """CTRL-style: divide positive logits / multiply negative ones of tokens already generated."""
    if penalty == 1.0:
        return logits
    picked = logits.gather(-1, tokens)
    picked = torch.where(picked > 0, picked / penalty, picked * penalty)
    return logits.scatter(-1, tokens, picked)


def filter_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    k = min(k, logits.shape[-1])
    threshold = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < threshold, float("-inf"))


def filter_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    remove = cumulative - sorted_logits.softmax(-1) > p  # keep the token that crosses p
    sorted_logits = sorted_logits.masked_fill(remove, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def filter_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    probs = logits.softmax(-1)
    threshold = min_p * probs.max(-1, keepdim=True).values
    return logits.masked_fill(probs < threshold, float("-inf"))


def sample_next(logits: torch.Tensor, cfg: SamplingConfig, generator: torch.Generator | None) -> torch.Tensor:
    if cfg.greedy:
        return logits.argmax(-1, keepdim=True)
    logits = logits / cfg.temperature
    if cfg.top_k is not None:
        logits = filter_top_k(logits, cfg.top_k)
    if cfg.top_p is not None:
        logits = filter_top_p(logits, cfg.top_p)
    if cfg.min_p is not None:
        logits = filter_min_p(logits, cfg.min_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)


@torch.no_grad()
def generate(model: nn.Module, input_ids: torch.Tensor, max_new_tokens: int, **kwargs) -> torch.Tensor:
    """Extend ``input_ids (B, T)`` by up to ``max_new_tokens``; rows that emit the stop token are
    padded with it afterwards."""
    cfg = SamplingConfig(**kwargs)
    cfg.validate()
    was_training = model.training
    model.eval()
    generator = torch.Generator(device=input_ids.device).manual_seed(cfg.seed) if cfg.seed is not None else None
    total = input_ids.shape[1] + max_new_tokens
    cache = model.new_cache(input_ids.shape[0], total)
    out = input_ids
    logits = model(input_ids, cache=cache).logits[:, -1]
    finished = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        logits = apply_repetition_penalty(logits, out, cfg.repetition_penalty)
        nxt = sample_next(logits, cfg, generator)
        if cfg.stop_token_id is not None:
            nxt = torch.where(finished[:, None], torch.full_like(nxt, cfg.stop_token_id), nxt)
            finished |= nxt[:, 0] == cfg.stop_token_id
        out = torch.cat([out, nxt], dim=1)
        if finished.all():
            break
        logits = model(nxt, cache=cache).logits[:, -1]
    model.train(was_training)
    return out
