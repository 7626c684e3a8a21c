"""Process-group helpers: the same code runs under ``python`` (one process) and ``torchrun``."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1


def init_distributed(backend: str = "gloo") -> DistInfo:
    if "RANK" not in os.environ:
        return DistInfo()
    dist.init_process_group(backend)
    return DistInfo(dist.get_rank(), dist.get_world_size())


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_min(value: int, info: DistInfo) -> int:
    if not info.enabled:
        return value
    t = torch.tensor([value])
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())


def mean_over_ranks(value: float, info: DistInfo) -> float:
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item()) / info.world
