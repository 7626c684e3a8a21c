"""Character-level ReLU RNN whose recurrent matrix is initialised with spectral radius 2.5.

Back-propagation through 40 time steps multiplies the gradient by the recurrent matrix at every step.
"""

import torch
import torch.nn.functional as F
from torch import nn


class CharRNN(nn.Module):
    def __init__(self, vocab=30, d=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.rnn = nn.RNN(d, d, nonlinearity="relu", batch_first=True)
        self.out = nn.Linear(d, vocab)
        with torch.no_grad():
            q, _ = torch.linalg.qr(torch.randn(d, d))
            self.rnn.weight_hh_l0.copy_(2.5 * q)  # bug: meant an orthogonal init with gain 1.0

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


def setup():
    torch.manual_seed(0)
    model = CharRNN()
    tokens = torch.randint(0, 30, (8, 41))
    return {
        "model": model,
        "batch": tokens,
        "loss_fn": lambda m, t: F.cross_entropy(m(t[:, :-1]).reshape(-1, 30), t[:, 1:].reshape(-1)),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01),
    }
