"""Train a timm model on scikit-learn's bundled digits and write timm's own summary.csv.

timm's train.py needs image folders and torchvision transforms; this driver keeps the parts that
write the log real: the model comes from `timm.create_model`, the optimizer and schedule from
`timm.optim.create_optimizer_v2` / `timm.scheduler.create_scheduler_v2`, the metrics from
`timm.utils.AverageMeter` / `timm.utils.accuracy`, and each epoch's row is written by
`timm.utils.update_summary` exactly as train.py calls it (train_loss, eval_loss, eval_top1,
eval_top5, lr). Run in a scratch venv with timm (and torchvision importable):

    python timm_digits.py --out summary.csv [--epochs 30] [--lr 1e-3] [--train-size 1400] [--img-size 16]
"""

from __future__ import annotations

import argparse
from collections import OrderedDict

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from timm import create_model
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from timm.utils import AverageMeter, accuracy, update_summary


def batches(x: torch.Tensor, y: torch.Tensor, bs: int, shuffle: bool, g: torch.Generator):
    idx = torch.randperm(len(x), generator=g) if shuffle else torch.arange(len(x))
    for i in range(0, len(x), bs):
        j = idx[i : i + bs]
        yield x[j], y[j]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--train-size", type=int, default=1400)
    p.add_argument("--model", default="resnet10t")
    p.add_argument("--img-size", type=int, default=16)
    a = p.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    xs, ys = load_digits(return_X_y=True)
    x = torch.tensor(xs / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    x = F.interpolate(x, size=a.img_size, mode="bilinear", align_corners=False)
    y = torch.tensor(ys, dtype=torch.long)
    perm = torch.randperm(len(x), generator=g)
    x, y = x[perm], y[perm]
    x_tr, y_tr = x[: a.train_size], y[: a.train_size]
    x_va, y_va = x[1400:], y[1400:]
    model = create_model(a.model, pretrained=False, num_classes=10, in_chans=1)
    optimizer = create_optimizer_v2(model, opt="adamw", lr=a.lr, weight_decay=0.05)
    scheduler, num_epochs = create_scheduler_v2(
        optimizer, sched="cosine", num_epochs=a.epochs, warmup_epochs=2, warmup_lr=1e-5, min_lr=1e-5
    )
    for epoch in range(num_epochs):
        model.train()
        losses = AverageMeter()
        for xb, yb in batches(x_tr, y_tr, 64, True, g):
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.update(loss.item(), xb.size(0))
        train_metrics = OrderedDict([("loss", losses.avg)])
        model.eval()
        e_loss, e_top1, e_top5 = AverageMeter(), AverageMeter(), AverageMeter()
        with torch.no_grad():
            for xb, yb in batches(x_va, y_va, 128, False, g):
                out = model(xb)
                acc1, acc5 = accuracy(out, yb, topk=(1, 5))
                e_loss.update(F.cross_entropy(out, yb).item(), xb.size(0))
                e_top1.update(acc1.item(), xb.size(0))
                e_top5.update(acc5.item(), xb.size(0))
        eval_metrics = OrderedDict([("loss", e_loss.avg), ("top1", e_top1.avg), ("top5", e_top5.avg)])
        lrl = [pg["lr"] for pg in optimizer.param_groups]
        lr = sum(lrl) / len(lrl)
        update_summary(epoch, train_metrics, eval_metrics, filename=a.out, lr=lr, write_header=epoch == 0)
        print(f"epoch {epoch} train_loss {losses.avg:.4f} eval_loss {e_loss.avg:.4f} top1 {e_top1.avg:.2f}")
        scheduler.step(epoch + 1, eval_metrics["top1"])


if __name__ == "__main__":
    main()
