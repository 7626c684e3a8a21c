"""Run several configs (and seeds) and print a markdown table of their test metrics.

    python tools/sweep.py configs/synth_patchtst.yaml configs/ablation_mlp_only.yaml --seeds 0 1 2
"""

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(config: str, seed: int, epochs: int | None) -> dict[str, float]:
    cmd = [sys.executable, str(ROOT / "tools" / "train.py"), "--quiet", "--config", config, f"train.seed={seed}"]
    if epochs is not None:
        cmd += ["--epochs", str(epochs)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    parts = out.split()
    return {parts[i]: float(parts[i + 1]) for i in range(1, len(parts) - 1, 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("configs", nargs="+")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--epochs", type=int, default=None)
    args = p.parse_args()
    print("| config | test MSE | test MAE | MASE |")
    print("|---|---|---|---|")
    for config in args.configs:
        runs = [run(config, seed, args.epochs) for seed in args.seeds]

        def cell(key: str) -> str:
            values = [r[key] for r in runs]
            if len(values) == 1:
                return f"{values[0]:.4f}"
            return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"

        print(f"| {Path(config).stem} | {cell('mse')} | {cell('mae')} | {cell('mase')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
