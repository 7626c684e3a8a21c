import argparse

import torch
from torch import nn

from data import global_batch
from model import SignalClassifier


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = SignalClassifier()
    opt = torch.optim.SGD(model.head.parameters(), lr=args.lr, momentum=0.9)
    xv, yv = global_batch(10**6, size=2000)
    for step in range(1, args.steps + 1):
        x, y = global_batch(step)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            with torch.no_grad():
                val = nn.functional.cross_entropy(model(xv), yv).item()
            print(f"step {step} loss {loss.item():.4f} val_loss {val:.4f}", flush=True)


if __name__ == "__main__":
    main()
