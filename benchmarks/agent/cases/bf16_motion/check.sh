#!/usr/bin/env bash
# With --bf16 the velocity model must be about as good as in fp32 (val_mse <= 0.05 m^2/s^2).
set -euo pipefail
out=$(python train.py --bf16)
echo "$out" | tail -n 2
mse=$(echo "$out" | tail -n 1 | sed -E 's/.*val_mse ([0-9.]+).*/\1/')
python -c "import sys; m = float('$mse'); sys.exit(0 if m <= 0.05 else 1)"
