from torch import nn


class MotionNet(nn.Module):
    """Embeds each fix with a shared position encoder and reads the velocity from the displacement."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.position = nn.Linear(2, dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 2))

    def forward(self, prev, cur):
        return self.head(self.position(cur) - self.position(prev))
