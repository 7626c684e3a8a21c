"""Small transformer whose AdamW parameter groups are built by name: `.weight` not in a norm goes to decay,
`.bias` goes to no-decay. The LayerNorm weights match neither rule and are left out of the optimizer.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self, vocab=120, d=32, n_classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.cls = nn.Linear(d, n_classes)

    def forward(self, tokens):
        return self.cls(self.encoder(self.embed(tokens)).mean(1))


def setup():
    torch.manual_seed(0)
    model = Encoder()
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]  # bug: norm weights missing
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3
    )
    tokens = torch.randint(0, 120, (16, 12))
    y = torch.randint(0, 3, (16,))
    return {
        "model": model,
        "batch": (tokens, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": optimizer,
    }
