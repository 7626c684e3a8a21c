"""Residuals of a checkpoint on the validation hours, by hour of day, temperature and building size.

    python scripts/residuals.py runs/x/last.pt [--config configs/default.json]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from loadcast.analysis.residuals import by_hour, by_size, by_temperature, format_table  # noqa: E402
from loadcast.config import parse_args  # noqa: E402
from loadcast.data import SiteStore, read_sites  # noqa: E402
from loadcast.serve import Predictor  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint")
    args, rest = p.parse_known_args()
    cfg = parse_args(rest)
    store = SiteStore(cfg.n_sites, cfg.hours_per_site, seed=cfg.data_seed)
    _, val = read_sites(store, store.site_ids(), cfg.train_frac)
    predictor = Predictor.from_checkpoint(args.checkpoint, cfg.width, cfg.depth)
    with torch.no_grad():
        pred = predictor.model(val.x)
    print(format_table("by hour of day", by_hour(pred, val.y, val.x)))
    print(format_table("by temperature (deg C)", by_temperature(pred, val.y, val.x)))
    print(format_table("by floor area (1000 m2)", by_size(pred, val.y, val.x)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
