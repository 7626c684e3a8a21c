#!/usr/bin/env bash
# A run preempted at step 100 and resumed must end where an uninterrupted run ends (same batches, same seed).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
full=$(python train.py --steps 200 --ckpt "$tmp/a.pt" | tail -n 1 | sed -E 's/final eval_loss //')
python train.py --steps 200 --ckpt "$tmp/b.pt" --stop-at 100 > /dev/null
resumed=$(python train.py --steps 200 --ckpt "$tmp/b.pt" --resume | tail -n 1 | sed -E 's/final eval_loss //')
echo "uninterrupted eval_loss $full, resumed eval_loss $resumed"
python -c "import sys; a, b = $full, $resumed; sys.exit(0 if abs(a - b) <= 0.002 * a else 1)"
