"""Evaluate a saved checkpoint on the validation or test subjects.

    python scripts/evaluate.py --config configs/default.json --checkpoint runs/x/best.pt
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from hartrack.config import load_config  # noqa: E402
from hartrack.data import build_loaders  # noqa: E402
from hartrack.engine.metrics import MetricTracker  # noqa: E402
from hartrack.models import build_model  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--split", choices=["val", "test"], default="test")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    cfg = load_config(args.config, args.overrides)
    data = build_loaders(cfg)
    model = build_model(cfg, data.n_classes, data.hr_mean)
    model.load_state_dict(torch.load(args.checkpoint, map_location="cpu", weights_only=False)["model"])
    model.eval()
    tracker = MetricTracker(data.n_classes)
    with torch.no_grad():
        for batch in getattr(data, args.split):
            tracker.update(model(batch["x"]), batch)
    print("  ".join(f"{k} {v:.4f}" for k, v in tracker.compute().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
