"""Mutable state of a fit, shared with the callbacks."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TrainerState:
    epoch: int = 0
    step: int = 0  # optimizer steps
    batch: int = 0  # batches seen in the current epoch
    should_stop: bool = False
    skip_step: bool = False  # set by a callback to drop the current batch's update
    best_score: float = float("-inf")
    best_epoch: int = -1
    epoch_terms: dict[str, float] = field(default_factory=dict)
    val_metrics: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)
