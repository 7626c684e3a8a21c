"""Document classifier with a "safe" masked mean: torch.where(length > 0, summed / length, 0).

Some documents in the batch are empty (all padding). The forward pass and the loss are finite because
torch.where picks 0, but the unused branch summed / 0 still gets a backward pass: 0 * (1 / 0) = NaN flows
into the encoder's gradients.
"""

import torch
import torch.nn.functional as F
from torch import nn


class DocClassifier(nn.Module):
    def __init__(self, vocab=400, d=32, n_classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.encoder = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        self.classifier = nn.Linear(d, n_classes)

    def forward(self, tokens):
        mask = (tokens != 0).unsqueeze(-1).float()
        h = self.encoder(self.embed(tokens)) * mask
        length = mask.sum(1)
        pooled = torch.where(length > 0, h.sum(1) / length, torch.zeros_like(length))  # bug: NaN gradient
        return self.classifier(pooled)


def setup():
    torch.manual_seed(0)
    model = DocClassifier()
    tokens = torch.randint(1, 400, (16, 30))
    tokens[:, 20:] = 0
    tokens[3] = 0  # two empty documents survived the data filter
    tokens[11] = 0
    labels = torch.randint(0, 4, (16,))
    return {
        "model": model,
        "batch": (tokens, labels),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }
