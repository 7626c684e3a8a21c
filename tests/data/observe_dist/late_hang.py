"""An epoch-end hang after the steps check_distributed compares: rank 0 holds one batch more (7 against 6),
so its last backward all-reduces alone while rank 1 waits in the final barrier. With the default 2 compared
steps, the old check stopped the job at step 2 and called it healthy."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6 + (1 if rank == 0 else 0)):  # BUG: a per-rank batch count
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.barrier()
dist.destroy_process_group()
