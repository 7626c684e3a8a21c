"""Datasets and loaders. Time split per site: the first ``train_frac`` of the hours train, the rest
validate. Under torchrun a DistributedSampler gives each rank its part of the training hours."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from loadcast.data.features import site_features, site_target
from loadcast.data.sites import SiteStore


@dataclass
class SplitTensors:
    x: torch.Tensor
    y: torch.Tensor
    site: torch.Tensor


def read_sites(store: SiteStore, site_ids: list[int], train_frac: float) -> tuple[SplitTensors, SplitTensors]:
    parts: dict[str, list[list[torch.Tensor]]] = {"train": [[], [], []], "val": [[], [], []]}
    for site_id in site_ids:
        site = store.read(site_id)
        x, y = site_features(site), site_target(site)
        cut = int(len(y) * train_frac)
        for name, sl in (("train", slice(0, cut)), ("val", slice(cut, None))):
            parts[name][0].append(x[sl])
            parts[name][1].append(y[sl])
            parts[name][2].append(torch.full((len(y[sl]),), site_id))
    train, val = ([torch.cat(c) for c in parts[k]] for k in ("train", "val"))
    return SplitTensors(*train), SplitTensors(*val)


def shard_sites(site_ids: list[int], rank: int, world: int) -> list[int]:
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"bad rank {rank} of world {world}")
    return site_ids[rank::world]


@dataclass
class Data:
    train: DataLoader
    train_x: torch.Tensor  # every site's training hours
    train_y: torch.Tensor
    val: SplitTensors | None  # every site; rank 0 evaluates
    n_features: int
    sites: list[int]


def build_data(cfg, rank: int = 0, world: int = 1) -> Data:
    store = SiteStore(cfg.n_sites, cfg.hours_per_site, seed=cfg.data_seed)
    train, val = read_sites(store, store.site_ids(), cfg.train_frac)
    dataset = TensorDataset(train.x, train.y)
    if world > 1:
        sampler = DistributedSampler(dataset, world, rank, shuffle=True, seed=cfg.seed, drop_last=True)
        loader = DataLoader(dataset, batch_size=cfg.batch_size // world, sampler=sampler, drop_last=True)
    else:
        gen = torch.Generator().manual_seed(cfg.seed)
        loader = DataLoader(dataset, batch_size=cfg.batch_size, shuffle=True, generator=gen, drop_last=True)
    return Data(
        train=loader,
        train_x=train.x,
        train_y=train.y,
        val=val if rank == 0 else None,
        n_features=train.x.shape[1],
        sites=store.site_ids(),
    )
