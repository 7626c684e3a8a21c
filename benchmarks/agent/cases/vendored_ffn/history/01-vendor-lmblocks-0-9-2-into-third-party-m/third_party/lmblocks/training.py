# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""A minimal language-model training loop for examples and quick experiments.

Real projects usually bring their own loop; this one exists so that the examples and the tests
of the package can train a model end to end without extra dependencies.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
from torch import nn

from .optimization import build_optimizer, cosine_with_warmup


@dataclass
class TrainArgs:
    steps: int = 1000
    lr: float = 3e-4
    weight_decay: float = 0.1
    warmup: int = 100
    grad_accum: int = 1
    grad_clip: float | None = 1.0
    eval_every: int = 200
    log_every: int = 50
    amp_dtype: torch.dtype | None = None


@dataclass
class TrainState:
    step: int = 0
    tokens: int = 0
    history: list[dict[str, float]] = field(default_factory=list)


def train_lm(
    model: nn.Module,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    args: TrainArgs,
    eval_fn: Callable[[nn.Module], float] | None = None,
    log: Callable[[str], None] = print,
) -> TrainState:
    """Train ``model`` on ``(input_ids, labels)`` batches; ``eval_fn(model)`` returns a validation loss."""
    device = next(model.parameters()).device
    optimizer = build_optimizer(model, args.lr, args.weight_decay)
    scheduler = cosine_with_warmup(optimizer, args.warmup, args.steps)
    state = TrainState()
    model.train()
    start = time.perf_counter()
    while state.step < args.steps:
        total = 0.0
        for _ in range(args.grad_accum):
            x, y = next(batches)
            x, y = x.to(device), y.to(device)
            with torch.autocast(device.type, dtype=args.amp_dtype, enabled=args.amp_dtype is not None):
                loss = model(x, labels=y).loss / args.grad_accum
            loss.backward()
            total += loss.item()
            state.tokens += x.numel()
        if args.grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state.step += 1
        record = {"step": state.step, "loss": total, "lr": scheduler.get_last_lr()[0]}
        if eval_fn is not None and (state.step % args.eval_every == 0 or state.step == args.steps):
            record["val_loss"] = eval_fn(model)
            model.train()
        state.history.append(record)
        if state.step % args.log_every == 0 or "val_loss" in record:
            rate = state.tokens / max(time.perf_counter() - start, 1e-9)
            extra = f"  val_loss {record['val_loss']:.4f}" if "val_loss" in record else ""
            log(f"step {state.step:6d}  loss {total:.4f}{extra}  ppl {math.exp(min(total, 50)):.1f}  {rate:,.0f} tok/s")
    return state
