# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Language-model metrics."""

from __future__ import annotations

import math

import torch


def perplexity(mean_nll: float) -> float:
    return math.exp(min(mean_nll, 700.0))


def bits_per_token(mean_nll: float) -> float:
    return mean_nll / math.log(2)


def bits_per_byte(total_nll: float, n_bytes: int) -> float:
    """Tokenizer-independent: total negative log-likelihood (nats) over the text's UTF-8 bytes."""
    return total_nll / (math.log(2) * max(n_bytes, 1))


@torch.no_grad()
def token_accuracy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> float:
    valid = labels != ignore_index
    if not valid.any():
        return float("nan")
    return (logits.argmax(-1)[valid] == labels[valid]).float().mean().item()
