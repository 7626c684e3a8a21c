#!/usr/bin/env bash
# The churn model must reach 75 % validation accuracy in 5 epochs, as it did when we shipped it.
set -euo pipefail
out=$(python train.py --epochs 5)
echo "$out"
acc=$(echo "$out" | tail -n 1 | sed -E 's/.*val_acc ([0-9.]+) %.*/\1/')
python -c "import sys; a = float('$acc'); print('final val_acc', a); sys.exit(0 if a >= 75 else 1)"
