#!/usr/bin/env bash
# Two processes on the same global batch must train as well as one (final val_loss within 10 %).
set -euo pipefail
err=$(mktemp)
trap 'rm -f "$err"' EXIT
one=$(python train.py | tail -n 1 | sed -E 's/.*val_loss ([0-9.]+).*/\1/')
if ! out=$(torchrun --standalone --nproc_per_node 2 train.py 2>"$err"); then
  echo "torchrun failed; its last lines:"; tail -n 20 "$err"; exit 2
fi
two=$(echo "$out" | tail -n 1 | sed -E 's/.*val_loss ([0-9.]+).*/\1/')
echo "1 process: val_loss $one   2 processes: val_loss $two"
python -c "import sys; a, b = $one, $two; sys.exit(0 if b <= 1.1 * a else 1)"
