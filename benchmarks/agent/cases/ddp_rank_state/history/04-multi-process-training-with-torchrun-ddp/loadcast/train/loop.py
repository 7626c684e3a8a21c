"""Training: standardise with the model's scaler, regress in standardised units, evaluate in kWh.

Under torchrun only ``model.net`` is wrapped in DDP: the scaler has no parameters, and training
needs the network's standardised output, not ``LoadModel.forward``'s kWh.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from loadcast.config import RunConfig
from loadcast.data import build_data
from loadcast.models import LoadModel
from loadcast.train import checkpoint
from loadcast.train.distributed import DistInfo, all_reduce_min, mean_over_ranks
from loadcast.train.metrics import regression_metrics


def cosine(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


@torch.no_grad()
def evaluate(model: LoadModel, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096) -> dict[str, float]:
    model.eval()
    pred = torch.cat([model(x[i : i + batch_size]) for i in range(0, len(x), batch_size)])
    model.train()
    return regression_metrics(pred, y)


def train(cfg: RunConfig, info: DistInfo, log=print) -> dict[str, float]:
    torch.manual_seed(cfg.seed)
    data = build_data(cfg, info.rank, info.world)
    model = LoadModel(data.n_features, cfg.width, cfg.depth, cfg.dropout)
    model.scaler.fit([(data.train_x, data.train_y)])  # statistics of the training data
    net = DDP(model.net) if info.enabled else model.net
    optimizer = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps_per_epoch = all_reduce_min(len(data.train), info)  # equal step counts on every rank
    total = cfg.epochs * steps_per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: cosine(s, total, cfg.warmup_steps))
    if info.is_main:
        log(f"{info.world} process(es); {len(data.sites)} sites; {steps_per_epoch} steps per epoch")
    metrics: dict[str, float] = {}
    start = time.time()
    for epoch in range(1, cfg.epochs + 1):
        if hasattr(data.train.sampler, "set_epoch"):
            data.train.sampler.set_epoch(epoch)
        running = 0.0
        for step, (x, y) in enumerate(data.train):
            if step >= steps_per_epoch:
                break
            pred = net(model.scaler.transform_x(x))
            loss = F.mse_loss(pred, model.scaler.transform_y(y))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            running += loss.item()
        train_loss = mean_over_ranks(running / steps_per_epoch, info)
        if info.is_main:
            metrics = evaluate(model, data.val.x, data.val.y)
            log(
                f"epoch {epoch:3d}  train_loss {train_loss:.4f}  val_mae {metrics['mae']:.3f}  "
                f"val_nmae {metrics['nmae']:.4f}  ({time.time() - start:.0f}s)"
            )
            if cfg.out_dir:
                checkpoint.save(f"{cfg.out_dir}/last.pt", model, optimizer, epoch)
    return metrics
