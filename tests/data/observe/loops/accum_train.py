"""Gradient accumulation over micro-batches (4 per optimizer step), the loss divided by the count.

python accum_train.py [--zero-grad-inside]   # the bug: zero_grad() inside the accumulation loop
"""

import argparse

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--zero-grad-inside", action="store_true")
ap.add_argument("--accum", type=int, default=4)
args = ap.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = torch.utils.data.TensorDataset(torch.randn(512, 16), torch.randint(0, 4, (512,)))
loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)

for epoch in range(3):
    for i, (x, y) in enumerate(loader):
        if args.zero_grad_inside:
            opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y) / args.accum
        loss.backward()
        if (i + 1) % args.accum == 0:
            opt.step()
            opt.zero_grad()
