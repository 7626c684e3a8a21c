"""Degree-day regression per site, evaluated on the validation hours of every site.

    python scripts/baseline.py [--config configs/default.json]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadcast.config import parse_args  # noqa: E402
from loadcast.data import SiteStore, read_sites  # noqa: E402
from loadcast.models.baselines import DegreeDayBaseline  # noqa: E402
from loadcast.train.metrics import regression_metrics  # noqa: E402


def main() -> int:
    cfg = parse_args()
    store = SiteStore(cfg.n_sites, cfg.hours_per_site, seed=cfg.data_seed)
    train, val = read_sites(store, store.site_ids(), cfg.train_frac)
    model = DegreeDayBaseline().fit(train.x, train.y, train.site)
    m = regression_metrics(model.predict(val.x, val.site), val.y)
    print(f"degree-day baseline val_mae {m['mae']:.3f} val_rmse {m['rmse']:.3f} val_nmae {m['nmae']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
