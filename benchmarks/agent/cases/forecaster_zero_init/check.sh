#!/usr/bin/env bash
# The transformer must clearly beat its own MLP-only ablation (attention off): test MSE <= 0.88x.
set -euo pipefail
export OMP_NUM_THREADS=1
run() { python tools/train.py --quiet --epochs 6 --config "$1" | tail -n 1; }
full=$(run configs/synth_patchtst.yaml)
mlp=$(run configs/ablation_mlp_only.yaml)
echo "synth_patchtst:    $full"
echo "ablation_mlp_only: $mlp"
python - "$full" "$mlp" <<'PY'
import sys
full, mlp = (float(s.split()[2]) for s in sys.argv[1:3])
ratio = full / mlp
print(f"test MSE patchtst / mlp-only = {ratio:.3f} (must be <= 0.88)")
sys.exit(0 if ratio <= 0.88 else 1)
PY
