"""Fine-tuning with a new head. python headswap_train.py [--late-optimizer] [--frozen-backbone]

The bug (default): the optimizer is built before the head is replaced, so the new head is in no
optimizer and never moves. --late-optimizer builds it afterwards (healthy). --frozen-backbone trains
only the head (a linear probe): with the bug, the optimizer then holds nothing the model holds.
"""

import argparse

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--late-optimizer", action="store_true")
ap.add_argument("--frozen-backbone", action="store_true")
args = ap.parse_args()

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.backbone(x))


model = Classifier()
if args.frozen_backbone:
    model.backbone.requires_grad_(False)
if not args.late_optimizer:
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
model.head = nn.Linear(64, 3)  # the new task has 3 classes
if args.late_optimizer:
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
x = torch.randn(512, 20)
y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
for _step in range(100):
    i = torch.randint(0, 512, (32,))
    loss = nn.functional.cross_entropy(model(x[i]), y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
