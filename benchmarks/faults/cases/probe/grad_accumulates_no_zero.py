"""A hand-written training step with no optimizer.zero_grad(): every backward adds to the previous
gradients, so the effective step grows with the step count.
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 10)
    y = torch.randint(0, 3, (32,))

    def train_step(m, batch):
        inputs, targets = batch
        loss = F.cross_entropy(m(inputs), targets)
        loss.backward()  # bug: gradients are never zeroed
        optimizer.step()
        return loss

    return {"model": model, "batch": (x, y), "step_fn": train_step, "optimizer": optimizer}
