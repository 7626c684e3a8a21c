"""Run the data quality checks on every site of the store.

    python scripts/check_data.py [--n-sites 16]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadcast.config import parse_args  # noqa: E402
from loadcast.data import SiteStore  # noqa: E402
from loadcast.data.quality import check_site  # noqa: E402


def main() -> int:
    cfg = parse_args()
    store = SiteStore(cfg.n_sites, cfg.hours_per_site, seed=cfg.data_seed)
    bad = 0
    for site_id in store.site_ids():
        report = check_site(store.read(site_id))
        bad += not report.ok
        print(report.summary())
    print(f"{bad} of {cfg.n_sites} sites with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
