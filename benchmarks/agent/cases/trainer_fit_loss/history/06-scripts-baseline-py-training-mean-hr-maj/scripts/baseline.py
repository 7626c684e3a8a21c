"""Trivial baselines on the test subjects: the training-mean heart rate and the majority activity.

    python scripts/baseline.py --config configs/default.json
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from hartrack.config import load_config  # noqa: E402
from hartrack.data import build_loaders  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    cfg = load_config(args.config, args.overrides)
    data = build_loaders(cfg)
    train_act = data.train.dataset.activity
    majority = int(torch.bincount(train_act).argmax())
    test = data.test.dataset
    mae = (test.hr - data.hr_mean).abs().mean().item()
    rmse = (test.hr - data.hr_mean).pow(2).mean().sqrt().item()
    acc = (test.activity == majority).float().mean().item()
    print(f"baseline acc {acc:.4f}  hr_mae {mae:.4f}  hr_rmse {rmse:.4f}  (train mean hr {data.hr_mean:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
