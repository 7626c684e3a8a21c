"""A barrier inside `if rank == 0`: rank 0 waits in it while rank 1 goes on to the next step's all-reduce."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 2 and rank == 0:
        dist.barrier()  # meant for every rank, reached by one
print(f"rank {rank} finished", flush=True)
dist.destroy_process_group()
