"""Uneven batch counts: rank 1 has one batch more, so its extra DDP all-reduce meets rank 0's barrier."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(8, 4) for _ in range(3 + rank)]
for x in batches:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.barrier()  # every rank done before saving
print(f"rank {rank} finished", flush=True)
dist.destroy_process_group()
