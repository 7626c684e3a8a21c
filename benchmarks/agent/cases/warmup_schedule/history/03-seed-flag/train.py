import argparse

import torch
from torch import nn

from data import make_split
from schedule import warmup_cosine


def train_one_epoch(model, opt, x, y, batch_size: int, step: int) -> int:
    perm = torch.randperm(len(x))
    for i in range(len(x) // batch_size):
        idx = perm[i * batch_size : (i + 1) * batch_size]
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 32 == 0:
            print(f"step {step} loss {loss.item():.4f} lr {opt.param_groups[0]['lr']:.2e}", flush=True)
    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=200, help="warmup length in optimizer steps")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    x, y = make_split(4096, seed=0)
    xv, yv = make_split(1024, seed=1)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = warmup_cosine(opt, args.warmup, args.epochs * (len(x) // args.batch_size))
    step = 0
    for epoch in range(1, args.epochs + 1):
        step = train_one_epoch(model, opt, x, y, args.batch_size, step)
        sched.step()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch} val_acc {acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
