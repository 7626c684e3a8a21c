"""A job that hangs: rank 1 skips a barrier (the classic `if rank == 0:` indentation slip), so
rank 0 waits in `barrier()` while rank 1 is busy elsewhere. Run it with

    python -m torch.distributed.run --nproc_per_node 2 examples/distributed/hang_skip_barrier.py

and, while it hangs, call `dump_stacks` with `pattern="hang_skip_barrier"`.
Set TS_HANG_READY_DIR to a folder to get one `rank<N>.ready` file per rank when it reaches the hang.
"""

import os
import time
from datetime import timedelta

import torch.distributed as dist


def mark_ready(rank):
    folder = os.environ.get("TS_HANG_READY_DIR")
    if folder:
        with open(os.path.join(folder, f"rank{rank}.ready"), "w") as fh:
            fh.write(str(os.getpid()))


def evaluate(rank):
    mark_ready(rank)
    deadline = time.time() + float(os.environ.get("TS_HANG_SECONDS", "120"))
    while time.time() < deadline:  # long work that never reaches the barrier
        time.sleep(0.2)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    if rank == 0:
        mark_ready(rank)
        dist.barrier()  # rank 0 waits here forever
    else:
        evaluate(rank)  # BUG: rank 1 should call dist.barrier() too
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
