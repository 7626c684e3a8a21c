"""A torch.compile'd model in a plain loop.

python compile_train.py [--zero-both]   # the bug: both factors of the hidden product start at zero
"""

import argparse

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--zero-both", action="store_true")
ap.add_argument("--backend", default="inductor")
args = ap.parse_args()

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
nn.init.zeros_(net[4].weight)  # a zero-initialised output layer: fine on its own
if args.zero_both:  # ... but with the layer before it zero too (weight and bias), neither ever moves
    nn.init.zeros_(net[2].weight)
    nn.init.zeros_(net[2].bias)
model = torch.compile(net, backend=args.backend)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(256, 8)
y = torch.sin(x[:, :1])
for step in range(200):
    i = torch.randint(0, 256, (32,))
    loss = nn.functional.mse_loss(model(x[i]), y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
