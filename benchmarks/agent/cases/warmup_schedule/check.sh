#!/usr/bin/env bash
# 8 epochs must reach 90 % validation accuracy, as they did before.
set -euo pipefail
out=$(python train.py --epochs 8)
echo "$out" | grep epoch
acc=$(echo "$out" | grep epoch | tail -n 1 | sed -E 's/.*val_acc ([0-9.]+).*/\1/')
python -c "import sys; a = float('$acc'); sys.exit(0 if a >= 0.9 else 1)"
