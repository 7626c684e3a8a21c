import argparse

import torch
from torch import nn

from data import make_fixes
from model import MotionNet


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for the forward pass")
    args = p.parse_args()

    torch.manual_seed(0)
    model = MotionNet()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    vprev, vcur, vvel = make_fixes(2000, seed=123)
    for step in range(1, args.steps + 1):
        prev, cur, vel = make_fixes(128, seed=step)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            pred = model(prev, cur)
        loss = nn.functional.mse_loss(pred.float(), vel)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                val = nn.functional.mse_loss(model(vprev, vcur).float(), vvel).item()
            print(f"step {step} train_mse {loss.item():.4f} val_mse {val:.4f}", flush=True)


if __name__ == "__main__":
    main()
