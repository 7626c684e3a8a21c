"""Healthy control: the user's own training step with gradient clipping."""

import torch
from torch import nn


def make() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))

    def step_fn(m: nn.Module, batch: tuple) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(m(batch[0]), batch[1])
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss.detach()

    return {"model": model, "batch": (x, y), "step_fn": step_fn}
