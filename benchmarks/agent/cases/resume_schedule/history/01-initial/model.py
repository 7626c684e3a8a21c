import torch
from torch import nn


class TinyCharLM(nn.Module):
    """An embedding, a GRU and a linear read-out over a 32-symbol vocabulary."""

    def __init__(self, vocab: int = 32, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.embed(tokens))
        return self.head(h)
