"""A patch transformer forecaster: blocks of attention and MLP over patches of the history."""

import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.proj_qkv = nn.Linear(dim, 3 * dim)
        self.proj_out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.proj_qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        y = att.softmax(-1) @ v
        return self.proj_out(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Forecaster(nn.Module):
    def __init__(self, patch, n_patches, horizon, dim, depth, heads):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(patch, dim)
        self.pos = nn.Parameter(torch.randn(1, n_patches, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim * n_patches, horizon)

    def forward(self, history):
        b = history.shape[0]
        x = self.embed(history.reshape(b, -1, self.patch)) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).reshape(b, -1))
