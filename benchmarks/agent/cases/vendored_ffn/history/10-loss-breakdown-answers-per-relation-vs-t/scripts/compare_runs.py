"""Compare the loss curves of two runs' log.csv files step by step.

    python scripts/compare_runs.py runs/a/log.csv runs/b/log.csv [--key loss]
"""

import argparse
import csv
import sys


def read(path: str, key: str) -> dict[int, float]:
    with open(path, newline="") as handle:
        return {int(r["step"]): float(r[key]) for r in csv.DictReader(handle) if r.get(key)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--key", default="loss")
    args = p.parse_args()
    a, b = read(args.a, args.key), read(args.b, args.key)
    common = sorted(set(a) & set(b))
    if not common:
        print("no common steps")
        return 1
    print(f"{'step':>6} {'a':>9} {'b':>9} {'b/a':>6}")
    for step in common:
        print(f"{step:>6} {a[step]:9.4f} {b[step]:9.4f} {b[step] / a[step]:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
