"""A small training setup with one entrypoint per resume bug, for `check_resume`.

Every function builds the same model, optimizer, LR schedule, grad scaler, EMA and data stream and
returns them with its own `save(path)` / `load(path)`; each buggy one leaves one piece out of the
checkpoint, the way real resume bugs do:

    trainsleuth resume-check examples/resume/resume_cases.py:no_optimizer   # names the optimizer state
    trainsleuth resume-check examples/resume/resume_cases.py:correct        # quiet
"""

from __future__ import annotations

import random
from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


class Stream:
    """A data stream with a position, like a sampler/dataloader that can be resumed."""

    def __init__(self) -> None:
        self.position = 0
        self.gen = torch.Generator().manual_seed(1234)
        self.order = torch.randperm(64, generator=self.gen)
        self.x = torch.randn(64, 8, generator=self.gen)
        self.y = self.x[:, :1] * 2.0 - self.x[:, 1:2] + 0.1 * torch.randn(64, 1, generator=self.gen)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.order[(self.position * 8) % 64 : (self.position * 8) % 64 + 8]
        self.position += 1
        return self.x[idx], self.y[idx]

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = state["position"]


def _setup(leave_out: str | None) -> dict[str, Any]:
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    stream = Stream()

    def step_fn(m: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(m(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        ema.update_parameters(m)
        return loss.detach()

    parts = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler, "ema": ema,
             "stream": stream}  # fmt: skip

    def save(path: str) -> None:
        state = {k: v.state_dict() for k, v in parts.items() if k != leave_out}
        if leave_out != "rng":
            state["rng"] = {"torch": torch.get_rng_state(), "python": random.getstate()}
        torch.save(state, path)

    def load(path: str) -> None:
        state = torch.load(path, weights_only=False)
        for k, v in parts.items():
            if k in state:
                v.load_state_dict(state[k])
        if "rng" in state:
            torch.set_rng_state(state["rng"]["torch"])
            random.setstate(state["rng"]["python"])

    return {
        "model": model,
        "optimizer": optimizer,
        "scheduler": scheduler,
        "scaler": scaler,
        "ema": ema,
        "next_batch": stream.next,
        "step_fn": step_fn,
        "save": save,
        "load": load,
    }


def correct() -> dict[str, Any]:
    return _setup(None)


def no_optimizer() -> dict[str, Any]:
    return _setup("optimizer")


def no_scheduler() -> dict[str, Any]:
    return _setup("scheduler")


def no_scaler() -> dict[str, Any]:
    return _setup("scaler")


def no_ema() -> dict[str, Any]:
    return _setup("ema")


def no_data_position() -> dict[str, Any]:
    return _setup("stream")


def no_rng() -> dict[str, Any]:
    return _setup("rng")


def state_dicts() -> dict[str, Any]:
    """No save/load of its own: check_resume saves and restores every state_dict itself."""
    setup = _setup(None)
    for key in ("save", "load", "next_batch"):
        setup.pop(key)
    stream = Stream()
    setup["batches"] = [stream.next() for _ in range(8)]
    return setup
