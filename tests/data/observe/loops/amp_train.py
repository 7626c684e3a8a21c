"""Mixed precision on CPU: bf16 autocast, or fp16 autocast with a GradScaler.

python amp_train.py --dtype bf16|fp16 [--broken]   # the bug: a (B, 1) prediction against (B,) targets
"""

import argparse

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
ap.add_argument("--broken", action="store_true")
args = ap.parse_args()

torch.manual_seed(0)
dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
model = nn.Sequential(nn.Linear(8, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu", enabled=args.dtype == "fp16")
x_all = torch.randn(1024, 8)
y_all = x_all[:, :3].sum(1) + 0.1 * torch.randn(1024)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_all, y_all), batch_size=32, shuffle=True)

for epoch in range(3):
    for x, y in loader:
        with torch.autocast("cpu", dtype=dtype):
            pred = model(x)
        target = y if args.broken else y.unsqueeze(1)
        loss = nn.functional.mse_loss(pred.float(), target)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
