"""Gradients never zeroed: the user's step calls backward and step but never zero_grad."""

import torch
from torch import nn


def broken() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))

    def step_fn(m: nn.Module, batch: tuple) -> torch.Tensor:
        loss = nn.functional.cross_entropy(m(batch[0]), batch[1])
        loss.backward()
        opt.step()  # missing opt.zero_grad(): gradients accumulate across steps
        return loss

    return {"model": model, "batch": (x, y), "step_fn": step_fn}
