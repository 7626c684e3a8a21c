"""Train: ``python scripts/train.py [--config configs/default.json] [--epochs 3 ...]``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadcast.config import parse_args  # noqa: E402
from loadcast.train.loop import train  # noqa: E402


def main() -> int:
    cfg = parse_args()
    metrics = train(cfg)
    print(f"final val_mae {metrics['mae']:.3f} val_rmse {metrics['rmse']:.3f} val_nmae {metrics['nmae']:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
