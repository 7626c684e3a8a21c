"""A healthy 2-rank DDP model whose BatchNorm all-reduces its statistics in forward (SyncBatchNorm refuses CPU).

The job's own collectives run inside every forward (and DDP's buffer broadcast and gradient all-reduce
around it): an observer that called collectives of its own between steps would pair with them.
"""

import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class AllReduceBN(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                stats = torch.stack([x.mean(0), x.var(0)])
                dist.all_reduce(stats)
                stats /= dist.get_world_size()
                self.running_mean.mul_(0.9).add_(0.1 * stats[0])
                self.running_var.mul_(0.9).add_(0.1 * stats[1])
            mean, var = x.mean(0), x.var(0)
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 32), AllReduceBN(32), nn.ReLU(), nn.Linear(32, 1)))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
g = torch.Generator().manual_seed(100 + rank)
for _ in range(steps):
    x = torch.randn(32, 8, generator=g)
    loss = (model(x).squeeze(1) - x.sum(1)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {rank} finished, loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
