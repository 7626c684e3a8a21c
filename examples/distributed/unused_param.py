"""A parameter that never receives a gradient: the auxiliary head is built but its output is not
used in the loss. DDP without find_unused_parameters=True waits for its gradient forever: the
bucket holding it is never reduced, and the next iteration fails with "Expected to have finished
reduction in the prior iteration".
"""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)
        self.aux_head = nn.Linear(16, 4)  # BUG: never used in forward

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def entry():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(8, 8)
    y = torch.randn(8, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
    }
