"""2-rank DDP where only the head is wrapped; frozen random features are called outside DDP.

    torchrun --nproc_per_node 2 two_ranks.py broken   # per-rank seed before the model: features differ
    torchrun --nproc_per_node 2 two_ranks.py healthy  # same seed: every shared tensor agrees
    torchrun --nproc_per_node 2 two_ranks.py drift    # an adapter outside DDP, trained per rank, drifts

Every mode also holds state that differs per rank by design and must not be reported: the random
generator state, a sampler order, a cache of the rank's own batch, and BatchNorm statistics inside a
DDP that re-broadcasts buffers at every forward.
"""

import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Features(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", torch.randn(8, 32))
        self.scale = torch.rand(32)  # a plain tensor attribute

    def forward(self, x):
        out = torch.cos(x @ self.w) * self.scale
        self.last_out = out  # this rank's batch, kept for logging
        return out


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = Features()
        self.adapter = nn.Linear(8, 8)
        self.head = nn.Sequential(nn.BatchNorm1d(32), nn.Linear(32, 3))


mode = sys.argv[1] if len(sys.argv) > 1 else "broken"
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank if mode == "broken" else 0)
model = Net()
torch.manual_seed(100 + rank)  # augmentation and data order differ per rank, as they should
model.rng_state = torch.get_rng_state()
model.sampler_order = torch.randperm(64)
head = DDP(model.head)
params = list(head.parameters()) + (list(model.adapter.parameters()) if mode == "drift" else [])
opt = torch.optim.SGD(params, lr=0.1)
for _ in range(30):
    x = torch.randn(16, 8)
    y = torch.randint(0, 3, (16,))
    z = model.adapter(x) if mode == "drift" else x
    loss = nn.functional.cross_entropy(head(model.features(z)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {rank} finished", flush=True)
dist.destroy_process_group()
