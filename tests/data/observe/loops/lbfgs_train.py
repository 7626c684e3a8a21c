"""A small regression fitted with LBFGS and a closure (healthy)."""

import torch
from torch import nn

torch.manual_seed(0)
x = torch.linspace(-2, 2, 128).unsqueeze(1)
y = torch.sin(2 * x) + 0.05 * torch.randn_like(x)
model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for step in range(30):
    opt.step(closure)
