#!/usr/bin/env bash
# configs/quick.json must reach the reference run's validation loss (docs/reference_run.md: 0.5304
# at step 400) within 15 %.
set -euo pipefail
export OMP_NUM_THREADS=1
out=$(python scripts/train.py --config configs/quick.json --quiet)
echo "$out"
python - "$out" <<'PY'
import re, sys
val = float(re.search(r"val_loss ([0-9.]+)", sys.argv[1]).group(1))
ref = 0.5304
print(f"final val_loss {val:.4f}, reference {ref:.4f}: {val / ref:.2f}x (must be <= 1.15x)")
sys.exit(0 if val <= 1.15 * ref else 1)
PY
