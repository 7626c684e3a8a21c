"""Attention over padded sequences. python nan_train.py [--mask-all-padding]

The bug: rows that are all padding get every key masked, softmax over all -inf is NaN.
"""

import argparse

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--mask-all-padding", action="store_true")
args = ap.parse_args()
torch.manual_seed(0)


class Pool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)

    def forward(self, x, mask):
        scores = self.query(x) @ self.key(x).transpose(1, 2) / x.shape[-1] ** 0.5
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        return (scores.softmax(-1) @ x).mean(1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.pool = Pool(16)
        self.out = nn.Linear(16, 2)

    def forward(self, ids, mask):
        return self.out(self.pool(self.embed(ids), mask))


model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(50):
    ids = torch.randint(1, 50, (8, 12))
    lengths = torch.randint(1, 12, (8,))
    if args.mask_all_padding:
        lengths[0] = 0  # an empty sequence in the batch
    mask = torch.arange(12)[None, :] < lengths[:, None]
    loss = nn.functional.cross_entropy(model(ids, mask), torch.randint(0, 2, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
