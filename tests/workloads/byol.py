"""BYOL: an online network learns to predict an EMA target network's projection of another view
(Grill et al. 2020, "Bootstrap Your Own Latent"; structure after lucidrains/byol-pytorch).

The target encoder and projector are a deep copy of the online ones, frozen (`requires_grad_(False)`:
they sit in the optimizer's parameter list, as in byol-pytorch, but never get a gradient), run under
`torch.no_grad()`, and updated after every step as an exponential moving average
(tau 0.99) of the online weights. Loss 2 - 2 cos(prediction, target projection), symmetrised over
the two views, Adam 1e-3. The health metric is the 1-NN accuracy of the online encoder's features on
the hidden cluster labels (`knn_acc`, higher is better); the loss falls too.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from synthetic import clusters, knn_accuracy
from torch import nn, optim

DIM, FEATURES, PROJ = 32, 64, 32


def augment(x: torch.Tensor) -> torch.Tensor:
    keep = (torch.rand(x.shape) > 0.2).float()
    return x * keep * (0.8 + 0.4 * torch.rand(x.size(0), 1)) + 0.3 * torch.randn(x.shape)


def mlp(d_in: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(d_in, FEATURES), nn.BatchNorm1d(FEATURES), nn.ReLU(), nn.Linear(FEATURES, d_out)
    )


def make_target(online: nn.Module) -> nn.Module:
    """The target starts as a copy of the online network and is never trained by gradient."""
    return copy.deepcopy(online).requires_grad_(False)


class BYOL(nn.Module):
    def __init__(
        self, make_target: Callable[[nn.Module], nn.Module] = make_target, tau: float = 0.99
    ) -> None:
        super().__init__()
        self.online_encoder = mlp(DIM, FEATURES)
        self.online_projector = mlp(FEATURES, PROJ)
        self.predictor = mlp(PROJ, PROJ)
        self.target_encoder = make_target(self.online_encoder)
        self.target_projector = make_target(self.online_projector)
        self.tau = tau

    def online(self, x: torch.Tensor) -> torch.Tensor:
        return self.predictor(self.online_projector(self.online_encoder(x)))

    def target(self, x: torch.Tensor) -> torch.Tensor:
        return self.target_projector(self.target_encoder(x))

    @torch.no_grad()
    def update_target(self) -> None:
        for online, target in (
            (self.online_encoder, self.target_encoder),
            (self.online_projector, self.target_projector),
        ):
            for p_o, p_t in zip(online.parameters(), target.parameters(), strict=True):
                p_t.mul_(self.tau).add_(p_o, alpha=1 - self.tau)


def target_projection(learner: BYOL, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return learner.target(x)


def byol_loss(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return (2 - 2 * F.cosine_similarity(p, z, dim=-1)).mean()


def main(
    argv: list[str] | None = None,
    make_target: Callable[[nn.Module], nn.Module] = make_target,
    target_projection: Callable[[BYOL, torch.Tensor], torch.Tensor] = target_projection,
) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = clusters(4096, DIM, classes=8, spread=3.0, seed=1)
    test_x, test_y = clusters(512, DIM, classes=8, spread=3.0, seed=2)
    learner = BYOL(make_target)
    # As in byol-pytorch's README: all of the learner's parameters; the frozen target's get no gradient.
    optimizer = optim.Adam(learner.parameters(), lr=args.lr)

    def test(step: int) -> None:
        learner.eval()
        with torch.no_grad():
            acc = knn_accuracy(
                learner.online_encoder(x[:1024]), y[:1024], learner.online_encoder(test_x), test_y
            )
        print(f"eval {step} knn_acc={acc:.4f}")
        learner.train()

    test(0)
    for step in range(1, args.steps + 1):
        batch = x[torch.randint(0, len(x), (args.batch_size,))]
        v1, v2 = augment(batch), augment(batch)
        optimizer.zero_grad()
        loss = byol_loss(learner.online(v1), target_projection(learner, v2))
        loss = loss + byol_loss(learner.online(v2), target_projection(learner, v1))
        loss.backward()
        optimizer.step()
        learner.update_target()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()
