"""Seeded synthetic data and evaluation metrics shared by the workloads (torch only).

The public examples train on MNIST, CIFAR, Penn Treebank, Cora or CartPole; the workloads here
replace each data set with a small generated one that has real structure, so that a healthy model
measurably learns it in a few seconds on a CPU.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def blob_images(n: int, size: int = 16, seed: int = 0) -> torch.Tensor:
    """Images (n, 1, size, size) in [-1, 1] of one bright Gaussian blob at a random place and width."""
    g = generator(seed)
    centre = torch.rand(n, 2, generator=g) * (size * 0.5) + size * 0.25
    width = torch.rand(n, 1, 1, generator=g) * 1.5 + 1.5
    axis = torch.arange(size, dtype=torch.float32)
    dy = (axis[None, :, None] - centre[:, 0, None, None]) ** 2
    dx = (axis[None, None, :] - centre[:, 1, None, None]) ** 2
    img = torch.exp(-(dx + dy) / (2 * width**2))
    return (img * 2 - 1).unsqueeze(1)


def smooth_images(n: int, size: int = 16, seed: int = 0) -> torch.Tensor:
    """Images (n, 1, size, size) in [0, 1]: sums of a few random low-frequency waves."""
    g = generator(seed)
    axis = torch.linspace(0, 1, size)
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")
    img = torch.zeros(n, size, size)
    for _ in range(3):
        fy, fx = (torch.rand(n, 2, generator=g) * 3).unbind(1)
        phase = torch.rand(n, generator=g) * 2 * math.pi
        img += torch.sin(
            2 * math.pi * (fy[:, None, None] * yy + fx[:, None, None] * xx) + phase[:, None, None]
        )
    img = (img - img.amin(dim=(1, 2), keepdim=True)) / (
        img.amax(dim=(1, 2), keepdim=True) - img.amin(dim=(1, 2), keepdim=True)
    )
    return img.unsqueeze(1)


def template_images(
    n: int, classes: int = 10, size: int = 16, noise: float = 0.3, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """A stand-in for MNIST: one fixed random stroke template per class, shifted by up to 2 pixels,
    plus noise. Returns images (n, 1, size, size) in about [0, 1] and labels (n,)."""
    g = generator(seed)
    templates = (torch.rand(classes, size, size, generator=generator(1234)) > 0.7).float()
    templates = F.avg_pool2d(templates.unsqueeze(1), 3, stride=1, padding=1).squeeze(1).clamp(0, 1)
    labels = torch.randint(0, classes, (n,), generator=g)
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    images = torch.stack(
        [
            torch.roll(templates[c], (int(s[0]), int(s[1])), dims=(0, 1))
            for c, s in zip(labels, shifts, strict=True)
        ]
    )
    images = images + noise * torch.randn(n, size, size, generator=g)
    return images.clamp(0, 1).unsqueeze(1), labels


def binary_patterns(
    n: int, dim: int = 64, prototypes: int = 6, flip: float = 0.05, seed: int = 0
) -> torch.Tensor:
    """Binary vectors (n, dim) in {0, 1}: one of a few prototypes with a few bits flipped."""
    protos = (torch.rand(prototypes, dim, generator=generator(4321)) > 0.5).float()
    g = generator(seed)
    x = protos[torch.randint(0, prototypes, (n,), generator=g)]
    flips = (torch.rand(n, dim, generator=g) < flip).float()
    return (x - flips).abs()


def clusters(
    n: int, dim: int = 16, classes: int = 4, spread: float = 1.0, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters: points (n, dim) around fixed random centres, and their labels."""
    centres = torch.randn(classes, dim, generator=generator(777)) * 2
    g = generator(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    return centres[labels] + spread * torch.randn(n, dim, generator=g), labels


def gaussian_ring(
    n: int, modes: int = 8, radius: float = 2.0, std: float = 0.05, seed: int = 0
) -> torch.Tensor:
    """The 8-Gaussians toy of the WGAN-GP paper: points (n, 2) on a ring of Gaussian modes."""
    g = generator(seed)
    angle = torch.randint(0, modes, (n,), generator=g).float() * (2 * math.pi / modes)
    centres = torch.stack([torch.cos(angle), torch.sin(angle)], dim=1) * radius
    return centres + std * torch.randn(n, 2, generator=g)


def two_moons(n: int, noise: float = 0.05, seed: int = 0) -> torch.Tensor:
    """Points (n, 2) on two interleaved half circles, scaled to about unit variance."""
    g = generator(seed)
    t = torch.rand(n, generator=g) * math.pi
    upper = torch.rand(n, generator=g) < 0.5
    x = torch.where(upper, torch.cos(t), 1 - torch.cos(t))
    y = torch.where(upper, torch.sin(t), 0.5 - torch.sin(t))
    pts = torch.stack([x - 0.5, y - 0.25], dim=1) * 2
    return pts + noise * torch.randn(n, 2, generator=g)


def markov_text(n_tokens: int, vocab: int = 40, seed: int = 0) -> torch.Tensor:
    """A token stream (n_tokens,) from a fixed sparse Markov chain: each word has 3 likely successors."""
    g0 = generator(99)
    successors = torch.randint(0, vocab, (vocab, 3), generator=g0)
    probs = torch.tensor([0.6, 0.3, 0.1])
    g = generator(seed)
    choice = torch.multinomial(probs, n_tokens, replacement=True, generator=g)
    tokens = torch.empty(n_tokens, dtype=torch.long)
    tokens[0] = 0
    for i in range(1, n_tokens):
        tokens[i] = successors[tokens[i - 1], choice[i]]
    return tokens


def batchify(tokens: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Lay a stream out as (length, batch_size) columns, as word_language_model does."""
    length = tokens.size(0) // batch_size
    return tokens[: length * batch_size].view(batch_size, length).t().contiguous()


def sliced_wasserstein(a: torch.Tensor, b: torch.Tensor, projections: int = 64, seed: int = 0) -> float:
    """Mean 1-D Wasserstein distance between two sample sets along fixed random directions."""
    a, b = a.flatten(1), b.flatten(1)
    dirs = F.normalize(torch.randn(a.size(1), projections, generator=generator(seed)), dim=0)
    pa, _ = torch.sort(a @ dirs, dim=0)
    pb, _ = torch.sort(b @ dirs, dim=0)
    return float((pa - pb).abs().mean())


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return float((logits.argmax(dim=-1) == labels).float().mean())


def psnr(pred: torch.Tensor, target: torch.Tensor) -> float:
    return float(10 * torch.log10(1.0 / F.mse_loss(pred, target)))


def knn_accuracy(
    train_z: torch.Tensor, train_y: torch.Tensor, test_z: torch.Tensor, test_y: torch.Tensor
) -> float:
    """1-nearest-neighbour accuracy by cosine similarity: how well an embedding separates classes."""
    sims = F.normalize(test_z, dim=1) @ F.normalize(train_z, dim=1).t()
    return float((train_y[sims.argmax(dim=1)] == test_y).float().mean())


def community_graph(
    nodes: int = 300, communities: int = 3, features: int = 64, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A stand-in for Cora: a stochastic block model graph with sparse bag-of-words node features.

    Returns the symmetric 0/1 adjacency (nodes, nodes) without self-loops, binary features whose word
    probabilities depend weakly on the community, and the community labels.
    """
    g = generator(seed)
    labels = torch.randint(0, communities, (nodes,), generator=g)
    same = labels[:, None] == labels[None, :]
    probs = torch.where(same, torch.tensor(0.04), torch.tensor(0.004))
    upper = torch.triu((torch.rand(nodes, nodes, generator=g) < probs).float(), diagonal=1)
    adj = upper + upper.t()
    word_probs = torch.full((communities, features), 0.05)
    for c in range(communities):
        word_probs[c, torch.randperm(features, generator=generator(50 + c))[:8]] = 0.15
    x = (torch.rand(nodes, features, generator=g) < word_probs[labels]).float()
    return adj, x, labels


def normalized_adjacency(adj: torch.Tensor) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2 as a sparse COO tensor (Kipf & Welling's renormalisation)."""
    a = adj + torch.eye(adj.size(0))
    d = a.sum(1).pow(-0.5)
    return (d[:, None] * a * d[None, :]).to_sparse()
