#!/usr/bin/env bash
# A linear probe on the pretrained encoder must classify the activities (val_acc >= 0.8 after 300 steps).
set -euo pipefail
out=$(python train.py --steps 300)
echo "$out"
acc=$(echo "$out" | tail -n 1 | sed -E 's/.*val_acc=([0-9.]+).*/\1/')
python -c "import sys; a = float('$acc'); sys.exit(0 if a >= 0.8 else 1)"
