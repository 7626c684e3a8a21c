import argparse

import torch
from torch import nn

from data import N_FEATURES, load_splits
from model import ChurnMLP


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y).item()
        acc = (logits.argmax(1) == y).float().mean().item() * 100
    model.train()
    return loss, acc


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--log-file", default=None, help="also append the epoch lines to this file")
    args = p.parse_args()

    torch.manual_seed(0)
    splits = load_splits()
    x_train, y_train = splits["train"]
    model = ChurnMLP(N_FEATURES)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        total = 0.0
        for i in range(0, len(x_train), args.batch_size):
            xb, yb = x_train[i : i + args.batch_size], y_train[i : i + args.batch_size]
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
        val_loss, val_acc = evaluate(model, *splits["val"])
        line = f"epoch {epoch} | train_loss {total / len(x_train):.4f} | val_loss {val_loss:.4f} | val_acc {val_acc:.1f} %"
        print(line, flush=True)
        if args.log_file:
            with open(args.log_file, "a") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    main()
