"""An MLP of a given width. python wide_train.py WIDTH (2400: about 6M weights, a "large" model for the probe)."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
width = int(sys.argv[1])
model = nn.Sequential(
    nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4)
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(256, 64), torch.randint(0, 4, (256,))
for _step in range(20):
    i = torch.randint(0, 256, (32,))
    loss = nn.functional.cross_entropy(model(x[i]), y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
