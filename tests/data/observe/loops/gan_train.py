"""A small GAN: two models, two optimizers, two losses per step (healthy)."""

import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
for step in range(200):
    real = torch.randn(64, 2) * 0.5 + torch.tensor([2.0, -1.0])
    fake = G(torch.randn(64, 4))
    lossD = bce(D(real), torch.ones(64, 1)) + bce(D(fake.detach()), torch.zeros(64, 1))
    optD.zero_grad()
    lossD.backward()
    optD.step()
    lossG = bce(D(fake), torch.ones(64, 1))
    optG.zero_grad()
    lossG.backward()
    optG.step()
