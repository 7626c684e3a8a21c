#!/usr/bin/env bash
# Two processes on the same global batch must train as well as one: the final val_mae of
# `torchrun --nproc_per_node 2` within 10 % of `python scripts/train.py`.
set -euo pipefail
export OMP_NUM_THREADS=1
# run_group LIMIT CMD...: run CMD in its own process group (session); after LIMIT seconds, or when this
# script is interrupted or killed, the whole group (launcher and every worker) is terminated, so a
# hung or crashed torchrun never leaves processes behind. Exit status: CMD's, or 124 on timeout.
RUN_GROUP='
import os, signal, subprocess, sys, time
limit, cmd = float(sys.argv[1]), sys.argv[2:]
child = subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL)
parent = os.getppid()
def kill_group():
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            for _ in range(30):
                time.sleep(0.1)
                try:
                    os.killpg(child.pid, 0)
                except ProcessLookupError:
                    return
def stop(signum, frame):
    kill_group()
    sys.exit(128 + signum)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, stop)
deadline = time.monotonic() + limit
rc = None
while rc is None:
    try:
        rc = child.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        if time.monotonic() > deadline:
            rc = 124
        elif os.getppid() != parent:  # the calling script was killed
            kill_group()
            sys.exit(1)
kill_group()  # workers a crashed launcher left behind
sys.exit(rc)
'
run_group() { python -c "$RUN_GROUP" "$@"; }
if [ -n "${CHECK_PORT:-}" ]; then
  LAUNCH=(torchrun --nnodes 1 --rdzv-backend c10d --rdzv-endpoint "localhost:$CHECK_PORT" --nproc_per_node 2)
else
  LAUNCH=(torchrun --standalone --nproc_per_node 2)
fi
err=$(mktemp)
trap 'rm -f "$err"' EXIT
one=$(run_group 240 python scripts/train.py --config configs/default.json | tail -n 1)
if ! two=$(run_group 240 "${LAUNCH[@]}" scripts/train.py --config configs/default.json 2>"$err" | tail -n 1); then
  echo "torchrun failed or timed out; its last lines:"; tail -n 20 "$err"; exit 2
fi
echo "1 process:   $one"
echo "2 processes: $two"
python - "$one" "$two" <<'PY'
import re, sys
a, b = (float(re.search(r"val_mae ([0-9.]+)", s).group(1)) for s in sys.argv[1:3])
print(f"val_mae 2 processes / 1 process = {b / a:.2f} (must be <= 1.10)")
sys.exit(0 if b <= 1.10 * a else 1)
PY
