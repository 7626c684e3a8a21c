"""A job that hangs: rank 1 skips a barrier (the classic `if rank == 0:` indentation slip), so
rank 0 waits in `barrier()` while rank 1 is busy elsewhere. Run it with

    TORCH_FR_BUFFER_SIZE=2000 TS_FR_PREFIX=/tmp/fr/rank \\
        python -m torch.distributed.run --nproc_per_node 2 examples/distributed/hang_skip_barrier.py

and, while it hangs, call `dump_stacks` with `pattern="hang_skip_barrier"` and
`flight_recorder="/tmp/fr"`: the stacks and the Flight Recorder's records side by side.

With NCCL, `TORCH_FR_DUMP_TEMP_FILE` makes torch write each rank's Flight Recorder dump itself when
a collective times out. gloo records collectives too (TORCH_FR_BUFFER_SIZE > 0) but never dumps
them on its own, so `keep_flight_recorder_dump` below keeps a fresh dump on disk from a background
thread: it works while the main thread is blocked inside a collective, where a signal handler
would never run. Set TS_HANG_READY_DIR to a folder to get one `rank<N>.ready` file per rank when it
reaches the hang.
"""

import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def keep_flight_recorder_dump(prefix, every_s=1.0):
    """Rewrite `<prefix><rank>` with this rank's Flight Recorder dump every `every_s` seconds."""
    path = f"{prefix}{dist.get_rank()}"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)

    def loop():
        while True:
            data = torch._C._distributed_c10d._dump_fr_trace()
            with open(path + ".tmp", "wb") as fh:
                fh.write(data)
            os.replace(path + ".tmp", path)
            time.sleep(every_s)

    threading.Thread(target=loop, name="flight-recorder-dump", daemon=True).start()


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
    if os.environ.get("TS_FR_PREFIX"):
        keep_flight_recorder_dump(os.environ["TS_FR_PREFIX"])
    dist.all_reduce(torch.ones(4))  # a collective every rank makes
    if rank == 0:
        mark_ready(rank)
        dist.barrier()  # rank 0 waits here forever
    else:
        evaluate(rank)  # BUG: rank 1 should call dist.barrier() too
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
