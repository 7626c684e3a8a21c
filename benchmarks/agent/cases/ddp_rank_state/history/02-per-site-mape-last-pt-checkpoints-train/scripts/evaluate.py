"""Evaluate a checkpoint on the validation hours of every site, overall and per site.

    python scripts/evaluate.py runs/x/last.pt [--config configs/default.json]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from loadcast.config import parse_args  # noqa: E402
from loadcast.data import SiteStore, read_sites  # noqa: E402
from loadcast.models import LoadModel  # noqa: E402
from loadcast.train import checkpoint  # noqa: E402
from loadcast.train.metrics import per_site_mape, regression_metrics  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint")
    args, rest = p.parse_known_args()
    cfg = parse_args(rest)
    store = SiteStore(cfg.n_sites, cfg.hours_per_site, seed=cfg.data_seed)
    _, val = read_sites(store, store.site_ids(), cfg.train_frac)
    model = LoadModel(val.x.shape[1], cfg.width, cfg.depth)
    checkpoint.load(args.checkpoint, model)
    model.eval()
    with torch.no_grad():
        pred = model(val.x)
    m = regression_metrics(pred, val.y)
    print(f"val_mae {m['mae']:.3f} val_rmse {m['rmse']:.3f} val_nmae {m['nmae']:.4f}")
    for site, mape in per_site_mape(pred, val.y, val.site).items():
        print(f"  site {site:3d}  MAPE {mape:6.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
