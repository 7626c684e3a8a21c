"""CLIP-style two-tower contrastive learning with a learnable temperature (Radford et al. 2021,
"Learning Transferable Visual Models From Natural Language Supervision"; after mlfoundations/open_clip).

Two encoders map paired views of a shared latent (two different noisy linear "modalities") into one
space; the symmetric InfoNCE loss over the batch, a learnable `logit_scale` initialised to log(1/0.07)
and clamped at log(100), AdamW with weight decay off for the scale. The health metric is held-out
retrieval accuracy (`retrieval_acc`, higher is better).
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from synthetic import generator
from torch import nn, optim

LATENT, DIM_A, DIM_B, EMBED = 8, 24, 40, 32


def paired_views(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    mix_a = torch.randn(LATENT, DIM_A, generator=generator(11))
    mix_b = torch.randn(LATENT, DIM_B, generator=generator(12))
    g = generator(seed)
    z = torch.randn(n, LATENT, generator=g)
    a = torch.tanh(z @ mix_a) + 0.1 * torch.randn(n, DIM_A, generator=g)
    b = z @ mix_b + 0.5 * torch.randn(n, DIM_B, generator=g)
    return a, b


class TwoTower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tower_a = nn.Sequential(nn.Linear(DIM_A, 64), nn.GELU(), nn.Linear(64, EMBED))
        self.tower_b = nn.Sequential(nn.Linear(DIM_B, 64), nn.GELU(), nn.Linear(64, EMBED))
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ea = F.normalize(self.tower_a(a), dim=-1)
        eb = F.normalize(self.tower_b(b), dim=-1)
        return self.logit_scale.exp() * ea @ eb.t()


def clip_loss(logits: torch.Tensor) -> torch.Tensor:
    labels = torch.arange(logits.size(0))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_a, train_b = paired_views(8192, seed=1)
    test_a, test_b = paired_views(256, seed=2)
    model = TwoTower()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=args.lr
    )

    def test(step: int) -> None:
        with torch.no_grad():
            logits = model(test_a, test_b)
        acc = (logits.argmax(dim=1) == torch.arange(len(test_a))).float().mean().item()
        print(f"eval {step} retrieval_acc={acc:.4f} test_loss={clip_loss(logits).item():.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(train_a), (args.batch_size,))
        optimizer.zero_grad()
        loss = clip_loss(model(train_a[idx], train_b[idx]))
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        print(f"step {step} loss={loss.item():.4f} logit_scale={model.logit_scale.exp().item():.2f}")
    test(args.steps)


if __name__ == "__main__":
    main()
