"""Local patches applied on top of the vendored lmblocks (see third_party/lmblocks/VENDORED.md).

ffn_recompute
    The hidden activation of the MLP (``mlp_ratio * d_model`` per token, the largest activation of
    a block) is not stored for the backward pass; the MLP is re-run from its input during the
    backward instead (activation checkpointing of just the MLP). At seq_len 512 this is the
    difference between fitting the base config on the 8 GB cards or not.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
from lmblocks.mlp import MLP
from torch import nn
from torch.utils.checkpoint import checkpoint

_ORIGINAL_FORWARD: dict[type[nn.Module], Callable[..., torch.Tensor]] = {}


def _recompute_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if self.training and torch.is_grad_enabled():
        return checkpoint(_ORIGINAL_FORWARD[type(self)], self, x, use_reentrant=False)
    return _ORIGINAL_FORWARD[type(self)](self, x)


def enable_ffn_recompute() -> None:
    """Patch lmblocks' MLP (idempotent)."""
    if MLP not in _ORIGINAL_FORWARD:
        _ORIGINAL_FORWARD[MLP] = MLP.forward
        MLP.forward = _recompute_forward  # type: ignore[method-assign]


def disable_ffn_recompute() -> None:
    for cls, forward in list(_ORIGINAL_FORWARD.items()):
        cls.forward = forward  # type: ignore[method-assign]
        del _ORIGINAL_FORWARD[cls]


@contextlib.contextmanager
def ffn_recompute() -> Iterator[None]:
    enable_ffn_recompute()
    try:
        yield
    finally:
        disable_ffn_recompute()
