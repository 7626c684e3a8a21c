# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""lmblocks: small, readable building blocks for decoder-only transformer language models."""

from .attention import CausalSelfAttention
from .blocks import TransformerBlock
from .cache import KVCache
from .checkpointing import enable_gradient_checkpointing
from .configuration import LMConfig, preset
from .feedforward import MLP, GatedFFN, build_feedforward
from .generation import SamplingConfig, generate
from .modeling import LMOutput, TransformerLM
from .optimization import build_optimizer, cosine_with_warmup, param_groups
from .serialization import load_pretrained, save_pretrained

__version__ = "0.10.1"

__all__ = [
    "CausalSelfAttention",
    "GatedFFN",
    "KVCache",
    "LMConfig",
    "LMOutput",
    "MLP",
    "SamplingConfig",
    "TransformerBlock",
    "TransformerLM",
    "build_feedforward",
    "build_optimizer",
    "cosine_with_warmup",
    "enable_gradient_checkpointing",
    "generate",
    "load_pretrained",
    "param_groups",
    "preset",
    "save_pretrained",
]
