# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Activation (gradient) checkpointing of whole transformer blocks.

``enable_gradient_checkpointing(model)`` makes ``TransformerLM.forward`` run each block under
``torch.utils.checkpoint``: the block's activations are dropped after the forward and recomputed
during the backward, trading about a third more compute for memory that no longer grows with depth.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def checkpoint_block(block: nn.Module, x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    # non-reentrant: works when inputs do not require grad and with parameters used outside the block
    return checkpoint(block, x, attention_mask, None, use_reentrant=False, preserve_rng_state=True)


def enable_gradient_checkpointing(model: nn.Module, enabled: bool = True) -> None:
    if not hasattr(model, "gradient_checkpointing"):
        raise TypeError(f"{type(model).__name__} does not support gradient checkpointing")
    model.gradient_checkpointing = enabled


def estimate_activation_memory(
    batch_size: int, seq_len: int, d_model: int, n_layers: int, ffn_mult: float = 4.0, bytes_per: int = 4
) -> dict[str, int]:
    """Rough activation memory (bytes) with and without block checkpointing (Korthikanti et al. 2022,
    without the attention-score terms that fused attention avoids)."""
    per_layer = batch_size * seq_len * d_model * (10 + 2 * ffn_mult) * bytes_per
    return {
        "full": per_layer * n_layers,
        "checkpointed": batch_size * seq_len * d_model * bytes_per * n_layers + per_layer,
    }
