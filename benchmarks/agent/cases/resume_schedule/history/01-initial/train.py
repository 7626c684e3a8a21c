"""Train the char LM. Long runs are preempted on our cluster, so training checkpoints and resumes:

    python train.py --steps 200 --save-every 100           # writes checkpoints/last.pt
    python train.py --steps 200 --resume                   # continues from checkpoints/last.pt
"""

import argparse
import math
from pathlib import Path

import torch
from torch import nn

from data import VOCAB, batch
from model import TinyCharLM


def make_scheduler(opt, warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def save_checkpoint(path: Path, model, opt, step: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, path)


def load_checkpoint(path: Path, model, opt) -> int:
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return state["step"]


def evaluate(model) -> float:
    with torch.no_grad():
        tokens = batch(10**6, size=256)
        logits = model(tokens[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1)).item()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--stop-at", type=int, default=None, help="stop after this step (simulates preemption)")
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument("--ckpt", type=Path, default=Path("checkpoints/last.pt"))
    p.add_argument("--resume", action="store_true")
    p.add_argument("--lr", type=float, default=3e-2)
    args = p.parse_args()

    torch.manual_seed(0)
    model = TinyCharLM(VOCAB)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = make_scheduler(opt, warmup=40, total=args.steps)
    start = 0
    if args.resume:
        start = load_checkpoint(args.ckpt, model, opt)
        print(f"resumed from {args.ckpt} at step {start}", flush=True)
    for step in range(start + 1, args.steps + 1):
        tokens = batch(step)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.3e}", flush=True)
        if step % args.save_every == 0:
            save_checkpoint(args.ckpt, model, opt, step)
        if args.stop_at is not None and step >= args.stop_at:
            print(f"stopped at step {step}", flush=True)
            return
    print(f"final eval_loss {evaluate(model):.4f}", flush=True)


if __name__ == "__main__":
    main()
