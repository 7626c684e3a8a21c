"""Step time (and peak CUDA memory on a GPU) with and without the memory options.

    python scripts/benchmark_memory.py --config configs/quick.json --steps 20
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from charlm.config import load_config  # noqa: E402
from charlm.data import prepare_data  # noqa: E402
from charlm.logging_utils import peak_memory_mb  # noqa: E402
from charlm.model import build_model  # noqa: E402

VARIANTS = {
    "plain": ["memory.ffn_recompute=false"],
    "ffn_recompute": ["memory.ffn_recompute=true"],
}


def bench(config: str, overrides: list[str], steps: int) -> tuple[float, float | None]:
    cfg = load_config(config, overrides)
    torch.manual_seed(cfg.seed)
    data = prepare_data(cfg.data_dir, cfg.seq_len, cfg.corpus)
    model = build_model(cfg, data.tokenizer.vocab_size)
    gen = torch.Generator().manual_seed(0)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        x, y = data.train.batch(cfg.batch_size, gen)
        start = time.perf_counter()
        model(x, labels=y).loss.backward()
        times.append(time.perf_counter() - start)
        model.zero_grad(set_to_none=True)
    times.sort()
    return times[len(times) // 2], peak_memory_mb()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/quick.json")
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    print(f"{'variant':<16} {'median step (ms)':>17} {'peak MB':>8}")
    for name, overrides in VARIANTS.items():
        median, peak = bench(args.config, overrides, args.steps)
        print(f"{name:<16} {1000 * median:>17.1f} {peak if peak is not None else '-':>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
