import argparse

import torch
from torch import nn

import config
from data import make_windows
from probe_model import LinearProbe


def build(num_classes: int, lr: float) -> tuple[LinearProbe, torch.optim.Optimizer]:
    model = LinearProbe()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.reset_classifier(num_classes)
    return model, opt


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=config.STEPS)
    p.add_argument("--lr", type=float, default=config.LR)
    args = p.parse_args()

    torch.manual_seed(0)
    model, opt = build(config.NUM_CLASSES, args.lr)
    xv, yv = make_windows(1000, config.NUM_CLASSES, seed=99)
    for step in range(1, args.steps + 1):
        x, y = make_windows(64, config.NUM_CLASSES, seed=step)
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
