"""A plain regression loop with one real bug: predictions (B, 1) against targets (B,) in F.mse_loss."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
x = torch.randn(256, 8)
y = x[:, 0] * 2.0 - x[:, 1]  # shape (256,)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for _epoch in range(20):
    for i in range(0, 256, 32):
        xb, yb = x[i : i + 32], y[i : i + 32]
        pred = model(xb)  # (32, 1)
        loss = F.mse_loss(pred, yb)  # bug: broadcasts (32, 1) against (32,) into (32, 32)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
