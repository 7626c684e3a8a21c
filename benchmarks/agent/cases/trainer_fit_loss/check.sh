#!/usr/bin/env bash
# A 4-epoch run of the default config must estimate heart rate far better than predicting the
# training mean (test HR MAE <= 0.5x the baseline's) and keep the activity accuracy (>= 0.9).
set -euo pipefail
export OMP_NUM_THREADS=1
base=$(python scripts/baseline.py --config configs/default.json | tail -n 1)
run=$(python scripts/train.py --config configs/default.json --quiet --set train.epochs=4 | tail -n 1)
echo "$base"
echo "$run"
python - "$base" "$run" <<'PY'
import re, sys
def get(text, key):
    return float(re.search(rf"\b{key} ([0-9.]+)", text).group(1))
base_mae, mae, acc = get(sys.argv[1], "hr_mae"), get(sys.argv[2], "hr_mae"), get(sys.argv[2], "acc")
print(f"test HR MAE {mae:.2f} bpm vs {base_mae:.2f} for the training mean ({mae / base_mae:.2f}x, must be <= 0.5x); "
      f"activity acc {acc:.3f} (must be >= 0.9)")
sys.exit(0 if mae <= 0.5 * base_mae and acc >= 0.9 else 1)
PY
