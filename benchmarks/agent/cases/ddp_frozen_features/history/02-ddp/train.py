"""Train the signal classifier on one process or several:

    python train.py
    torchrun --nproc_per_node 2 train.py      # same global batch, split over the ranks
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from data import global_batch
from model import SignalClassifier


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--noise", type=float, default=0.05, help="input-noise augmentation")
    args = p.parse_args()

    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(args.seed + rank)  # each rank draws different augmentation noise

    model = SignalClassifier()
    head = DDP(model.head) if distributed else model.head  # only the head is trained
    opt = torch.optim.SGD(head.parameters(), lr=args.lr, momentum=0.9)
    xv, yv = global_batch(10**6, size=2000)
    for step in range(1, args.steps + 1):
        x, y = global_batch(step)
        x, y = x[rank::world], y[rank::world]
        x = x + args.noise * torch.randn_like(x)
        loss = nn.functional.cross_entropy(head(model.features(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 and rank == 0:
            with torch.no_grad():
                val = nn.functional.cross_entropy(model(xv), yv).item()
            print(f"step {step} loss {loss.item():.4f} val_loss {val:.4f}", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
