# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Beam search with length normalisation, for deterministic decoding of short answers."""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def beam_search(
    model: nn.Module,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    num_beams: int = 4,
    length_penalty: float = 1.0,
    stop_token_id: int | None = None,
) -> tuple[torch.Tensor, float]:
    """Decode one prompt ``(1, T)``; returns the best sequence ``(1, T + n)`` and its score."""
    if input_ids.shape[0] != 1:
        raise ValueError("beam_search decodes one prompt at a time")
    was_training = model.training
    model.eval()
    prompt_len = input_ids.shape[1]
    cache = model.new_cache(num_beams, prompt_len + max_new_tokens)
    beams = input_ids.repeat(num_beams, 1)
    logprobs = model(beams, cache=cache).logits[:, -1].float().log_softmax(-1)
    scores = torch.zeros(num_beams)
    scores[1:] = float("-inf")  # all beams start identical: expand only the first
    finished: list[tuple[float, torch.Tensor]] = []
    for step in range(max_new_tokens):
        vocab = logprobs.shape[-1]
        candidates = (scores[:, None] + logprobs).reshape(-1)
        top, flat = candidates.topk(num_beams)
        origin, token = flat // vocab, flat % vocab
        beams = torch.cat([beams[origin], token[:, None]], dim=1)
        cache.reorder(origin)
        scores = top.clone()
        if stop_token_id is not None:
            done = token == stop_token_id
            for i in done.nonzero().flatten().tolist():
                length = beams.shape[1] - prompt_len
                finished.append((scores[i].item() / length**length_penalty, beams[i].clone()))
                scores[i] = float("-inf")
            if len(finished) >= num_beams or torch.isinf(scores).all():
                break
        logprobs = model(token[:, None], cache=cache).logits[:, -1].float().log_softmax(-1)
    length = beams.shape[1] - prompt_len
    for i in range(num_beams):
        if torch.isfinite(scores[i]):
            finished.append((scores[i].item() / max(length, 1) ** length_penalty, beams[i].clone()))
    model.train(was_training)
    best_score, best = max(finished, key=lambda item: item[0])
    return best[None], best_score
