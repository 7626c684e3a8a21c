# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Train a tiny byte-level model on a text file: ``python examples/train_tiny.py input.txt``."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from lmblocks import LMConfig, TransformerLM  # noqa: E402
from lmblocks.data import RandomWindows  # noqa: E402
from lmblocks.training import TrainArgs, train_lm  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("text")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    args = p.parse_args()
    data = torch.tensor(list(Path(args.text).read_bytes()), dtype=torch.long)
    split = int(0.95 * len(data))
    config = LMConfig(vocab_size=256, d_model=128, n_layers=4, n_heads=4, max_seq_len=args.seq_len)
    model = TransformerLM(config)
    windows = iter(torch.utils.data.DataLoader(RandomWindows(data[:split], args.seq_len), batch_size=args.batch_size))
    val = RandomWindows(data[split:], args.seq_len, seed=1)

    @torch.no_grad()
    def evaluate(m: torch.nn.Module) -> float:
        m.eval()
        it = iter(val)
        batch = [next(it) for _ in range(16)]
        x = torch.stack([b[0] for b in batch])
        y = torch.stack([b[1] for b in batch])
        return m(x, labels=y).loss.item()

    train_lm(model, windows, TrainArgs(steps=args.steps, lr=1e-3, warmup=50, eval_every=100), evaluate)
    prompt = torch.tensor([list(b"The ")])
    print(bytes(model.generate(prompt, 200, temperature=0.8, top_p=0.95, seed=0)[0].tolist()).decode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
