"""Train: ``python scripts/train.py --config configs/default.json [--set train.epochs=5 ...]``."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hartrack.config import load_config  # noqa: E402
from hartrack.engine import Trainer  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    cfg = load_config(args.config, args.overrides)
    test = Trainer(cfg, log=(lambda s: None) if args.quiet else print).fit()
    print("test " + "  ".join(f"{k} {v:.4f}" for k, v in test.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
