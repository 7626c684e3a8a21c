"""Train the demo classifier on synthetic data and log one line per step.

    python train.py [--steps N]

Exit code 1 when the loss becomes NaN or Inf (this is the investigation's reproducer), else 0.
The data pipeline pads the last batch of every epoch (40 batches) with all-zero rows.
"""

import argparse
import math
import sys

import torch
from model import Classifier
from torch import nn

BATCHES_PER_EPOCH = 40
BATCH_SIZE = 32
PADDING_ROWS = 6


def make_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of a training step (1-based), deterministic: four Gaussian clusters."""
    g = torch.Generator().manual_seed(step)
    y = torch.randint(0, 4, (BATCH_SIZE,), generator=g)
    centers = torch.eye(4, 16) * 3.0
    x = centers[y] + torch.randn(BATCH_SIZE, 16, generator=g)
    if step % BATCHES_PER_EPOCH == 0:  # the epoch's last, short batch is padded to full size
        x[-PADDING_ROWS:] = 0.0
    return x, y


def build(lr: float = 0.05) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = Classifier()
    return model, torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return nn.functional.cross_entropy(model(x), y)


def probe_epoch_end() -> dict:
    """For `trainsleuth probe train.py:probe_epoch_end`: the model on the batch of step 40, the
    last batch of the first epoch, where the log shows the loss turning NaN."""
    model, optimizer = build()
    return {
        "model": model,
        "batch": make_batch(BATCHES_PER_EPOCH),
        "loss_fn": loss_fn,
        "optimizer": optimizer,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    model, optimizer = build()
    lr = optimizer.param_groups[0]["lr"]
    finite = True
    for step in range(1, args.steps + 1):
        batch = make_batch(step)
        optimizer.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
        optimizer.step()
        value = loss.item()
        print(f"step {step:4d} | loss {value:.4f} | grad_norm {grad_norm:.4f} | lr {lr:.3g}", flush=True)
        finite = finite and math.isfinite(value)
    if not finite:
        print("error: the loss became non-finite (NaN/Inf)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
