"""A synthetic 'language': a fixed random Markov chain over 32 symbols; batch k is reproducible."""

import torch

VOCAB = 32
_TRANS = torch.softmax(3.0 * torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(11)), dim=1)


def batch(step: int, size: int = 32, length: int = 32) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + step)
    seq = torch.empty(size, length, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (size,), generator=g)
    for t in range(1, length):
        seq[:, t] = torch.multinomial(_TRANS[seq[:, t - 1]], 1, generator=g).squeeze(1)
    return seq
