"""Tiny decoder with a hand-written RMSNorm that subtracts eps instead of adding it.

Padding tokens embed to exact zeros (padding_idx=0), so their mean square is 0 and sqrt(0 - eps) is NaN
inside the first block's norm.
"""

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) - self.eps)  # bug: + eps


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm = RMSNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = RMSNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab=100, d=32, n_layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.blocks = nn.ModuleList([Block(d, 4) for _ in range(n_layers)])
        self.lm_head = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(x)


def setup():
    torch.manual_seed(0)
    model = TinyLM()
    tokens = torch.randint(1, 100, (8, 17))
    tokens[:, 12:] = 0  # right padding
    return {
        "model": model,
        "batch": tokens,
        "loss_fn": lambda m, t: F.cross_entropy(
            m(t[:, :-1]).reshape(-1, 100), t[:, 1:].reshape(-1), ignore_index=0
        ),
        "optimizer": torch.optim.AdamW(model.parameters(), lr=3e-4),
    }
