# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""lmblocks: small, readable building blocks for decoder-only transformer language models."""

from .attention import CausalSelfAttention
from .blocks import TransformerBlock
from .cache import KVCache
from .configuration import LMConfig, preset
from .generation import SamplingConfig, generate
from .mlp import MLP
from .modeling import LMOutput, TransformerLM
from .optimization import build_optimizer, cosine_with_warmup, param_groups
from .serialization import load_pretrained, save_pretrained

__version__ = "0.9.2"

__all__ = [
    "CausalSelfAttention",
    "KVCache",
    "LMConfig",
    "LMOutput",
    "MLP",
    "SamplingConfig",
    "TransformerBlock",
    "TransformerLM",
    "build_optimizer",
    "cosine_with_warmup",
    "generate",
    "load_pretrained",
    "param_groups",
    "preset",
    "save_pretrained",
]
