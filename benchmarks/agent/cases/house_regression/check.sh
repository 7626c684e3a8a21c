#!/usr/bin/env bash
# The regressor must explain most of the variance on its own training set (R^2 >= 0.8 after 20 epochs).
set -euo pipefail
out=$(python train.py --epochs 20)
echo "$out" | tail -n 3
r2=$(echo "$out" | tail -n 1 | sed -E 's/.*train_r2 (-?[0-9.]+).*/\1/')
python -c "import sys; r = float('$r2'); print('final train_r2', r); sys.exit(0 if r >= 0.8 else 1)"
