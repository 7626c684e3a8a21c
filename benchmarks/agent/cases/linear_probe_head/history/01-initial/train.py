import argparse

import torch
from torch import nn

from data import make_windows
from probe_model import LinearProbe


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=1e-2)
    args = p.parse_args()

    torch.manual_seed(0)
    model = LinearProbe(num_classes=4)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    xv, yv = make_windows(1000, 4, seed=99)
    for step in range(1, args.steps + 1):
        x, y = make_windows(64, 4, seed=step)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            with torch.no_grad():
                acc = (model(xv).argmax(1) == yv).float().mean().item()
            print(f"step {step} loss={loss.item():.4f} val_acc={acc:.3f}", flush=True)


if __name__ == "__main__":
    main()
