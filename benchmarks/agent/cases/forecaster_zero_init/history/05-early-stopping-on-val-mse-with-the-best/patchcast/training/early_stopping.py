"""Early stopping on a validation metric, keeping the best weights in memory."""

from __future__ import annotations

import copy

import torch
from torch import nn


class EarlyStopping:
    def __init__(self, patience: int, min_delta: float = 0.0) -> None:
        self.patience = patience
        self.min_delta = min_delta
        self.best = float("inf")
        self.best_epoch = -1
        self.bad_epochs = 0
        self.best_state: dict[str, torch.Tensor] | None = None

    def step(self, value: float, model: nn.Module, epoch: int) -> bool:
        """Record ``value``; returns True when training should stop."""
        if value < self.best - self.min_delta:
            self.best = value
            self.best_epoch = epoch
            self.bad_epochs = 0
            self.best_state = copy.deepcopy(model.state_dict())
            return False
        self.bad_epochs += 1
        return self.patience > 0 and self.bad_epochs >= self.patience

    def restore(self, model: nn.Module) -> None:
        if self.best_state is not None:
            model.load_state_dict(self.best_state)
