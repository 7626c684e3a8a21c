"""Text plot of a run's log.csv: ``python scripts/plot_log.py runs/quick/log.csv [--key loss]``."""

import argparse
import csv
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("log")
    p.add_argument("--key", default="loss")
    p.add_argument("--width", type=int, default=60)
    args = p.parse_args()
    with open(args.log, newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get(args.key)]
    if not rows:
        print(f"no {args.key!r} column in {args.log}")
        return 1
    values = [float(r[args.key]) for r in rows]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    for row, value in zip(rows, values):
        bar = "#" * max(1, round((value - low) / span * args.width))
        print(f"{row['step']:>6} {value:9.4f} {bar}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
