"""Summary of the sites in the store: floor area, mean load, temperature range.

    python scripts/describe_sites.py [--n-sites 16]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadcast.config import parse_args  # noqa: E402
from loadcast.data import SiteStore  # noqa: E402


def main() -> int:
    cfg = parse_args()
    store = SiteStore(cfg.n_sites, cfg.hours_per_site, seed=cfg.data_seed)
    print(f"{'site':>4} {'area (1000 m2)':>15} {'mean kWh':>9} {'max kWh':>8} {'t min':>6} {'t max':>6}")
    for site_id in store.site_ids():
        s = store.read(site_id)
        print(
            f"{site_id:>4} {s.area:>15.2f} {float(s.load.mean()):>9.1f} {float(s.load.max()):>8.1f} "
            f"{float(s.temperature.min()):>6.1f} {float(s.temperature.max()):>6.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
