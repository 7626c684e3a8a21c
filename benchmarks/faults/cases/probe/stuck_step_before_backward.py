"""A training step with its lines in the wrong order: zero_grad(), step(), then backward().

The optimizer always steps on freshly zeroed gradients, so the weights never move and the loss on a
fixed batch stays where it started.
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv1d(4, 16, 5, padding=2), nn.ReLU(), nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(16, 2)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(32, 4, 50)
    y = torch.randint(0, 2, (32,))

    def train_step(m, batch):
        seqs, labels = batch
        optimizer.zero_grad()
        optimizer.step()  # bug: steps before the gradients exist
        loss = F.cross_entropy(m(seqs), labels)
        loss.backward()
        return loss

    return {"model": model, "batch": (x, y), "step_fn": train_step, "optimizer": optimizer}
