import torch
from torch import nn

from encoder import load_pretrained


class LinearProbe(nn.Module):
    """A frozen pretrained encoder and a trainable linear classifier on its features."""

    def __init__(self, num_classes: int = 4) -> None:
        super().__init__()
        self.encoder = load_pretrained()
        self.classifier = nn.Linear(256, num_classes)

    def forward(self, x):
        with torch.no_grad():
            feats = self.encoder(x)
        return self.classifier(feats)
