"""Evaluation: validation loss."""

from __future__ import annotations

import math

import torch
from lmblocks import TransformerLM

from charlm.data import TokenStream


@torch.no_grad()
def eval_loss(model: TransformerLM, stream: TokenStream, batch_size: int, max_batches: int) -> float:
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for x, y in stream.sequential(batch_size, max_batches):
        total += model(x, labels=y).loss.item() * x.numel()
        count += x.numel()
    model.train(was_training)
    return total / max(count, 1)


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 50.0))
