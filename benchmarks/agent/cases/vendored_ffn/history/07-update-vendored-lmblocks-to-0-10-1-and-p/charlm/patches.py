"""Local patches applied on top of the vendored lmblocks (see third_party/lmblocks/VENDORED.md).

ffn_recompute
    The hidden activation of the feed-forward block (``ffn_mult * d_model`` per token, the largest
    activation of a block) is not stored for the backward pass; the FFN is re-run from its input
    during the backward instead. At seq_len 512 this is the difference between fitting the base
    config on the 8 GB cards or not.

    lmblocks >= 0.10 can checkpoint whole blocks (``memory.gradient_checkpointing``). Nesting
    ``torch.utils.checkpoint`` for the FFN inside a checkpointed block recomputed the FFN three
    times per step and, with dropout on, failed the non-reentrant checkpoint's saved-tensor check.
    So the recompute is a small autograd.Function of its own: forward under no_grad (nothing is
    saved but the input), backward re-runs the FFN with grad enabled and backpropagates through it.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
from lmblocks.feedforward import FEEDFORWARD_CLASSES
from torch import nn

_ORIGINAL_FORWARD: dict[type[nn.Module], Callable[..., torch.Tensor]] = {}


class _RecomputeFFN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, ffn: nn.Module) -> torch.Tensor:  # type: ignore[override]
        ctx.ffn = ffn
        ctx.cpu_rng = torch.get_rng_state()  # replay the same dropout mask in backward
        ctx.save_for_backward(x)
        with torch.no_grad():
            return _ORIGINAL_FORWARD[type(ffn)](ffn, x)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        rng = torch.get_rng_state()
        torch.set_rng_state(ctx.cpu_rng)
        try:
            with torch.enable_grad():
                x = x.detach().requires_grad_(x.requires_grad)
                out = _ORIGINAL_FORWARD[type(ctx.ffn)](ctx.ffn, x)
            (grad_x,) = torch.autograd.grad(out, (x,), grad_out)
        finally:
            torch.set_rng_state(rng)
        return grad_x, None


def _recompute_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if self.training and torch.is_grad_enabled() and x.requires_grad:
        return _RecomputeFFN.apply(x, self)
    return _ORIGINAL_FORWARD[type(self)](self, x)


def enable_ffn_recompute() -> None:
    """Patch every lmblocks feed-forward class (idempotent)."""
    for cls in FEEDFORWARD_CLASSES:
        if cls not in _ORIGINAL_FORWARD:
            _ORIGINAL_FORWARD[cls] = cls.forward
            cls.forward = _recompute_forward  # type: ignore[method-assign]


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
