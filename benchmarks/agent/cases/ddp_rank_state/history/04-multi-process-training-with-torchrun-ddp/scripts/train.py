"""Train: ``python scripts/train.py [--config configs/default.json] [--epochs 3 ...]`` or
``torchrun --nproc_per_node N scripts/train.py ...`` (the global batch is split over the ranks)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadcast.config import parse_args  # noqa: E402
from loadcast.train.distributed import init_distributed, shutdown  # noqa: E402
from loadcast.train.loop import train  # noqa: E402


def main() -> int:
    cfg = parse_args()
    info = init_distributed()
    try:
        metrics = train(cfg, info)
        if info.is_main:
            print(f"final val_mae {metrics['mae']:.3f} val_rmse {metrics['rmse']:.3f} val_nmae {metrics['nmae']:.4f}", flush=True)
    finally:
        shutdown(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
