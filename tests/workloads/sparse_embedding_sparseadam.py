"""A bag-of-words classifier with a sparse embedding bag and two optimizers (the pattern of the
`torch.optim.SparseAdam` documentation; model after the torchtext text-classification tutorial).

`nn.EmbeddingBag(sparse=True, mode="mean")` produces sparse gradients, which only `SparseAdam` (for
the embedding) can take; the dense linear classifier has its own `Adam`. Both step every batch. The
documents are token streams whose topic decides which words are frequent. The health metric is held-out
accuracy (`test_acc`, higher is better).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from synthetic import generator
from torch import nn, optim

VOCAB, EMBED, TOPICS, DOC_LEN = 500, 32, 4, 20


def documents(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (n, DOC_LEN): half the words from the topic's own 30-word list, half from anywhere."""
    topic_words = torch.randint(0, VOCAB, (TOPICS, 30), generator=generator(21))
    g = generator(seed)
    topics = torch.randint(0, TOPICS, (n,), generator=g)
    own = topic_words[topics][torch.arange(n)[:, None], torch.randint(0, 30, (n, DOC_LEN), generator=g)]
    anywhere = torch.randint(0, VOCAB, (n, DOC_LEN), generator=g)
    return torch.where(torch.rand(n, DOC_LEN, generator=g) < 0.5, own, anywhere), topics


class TextClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(VOCAB, EMBED, mode="mean", sparse=True)
        self.fc = nn.Linear(EMBED, TOPICS)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embedding(tokens))


def make_optimizers(model: TextClassifier, lr: float) -> list[optim.Optimizer]:
    return [
        optim.SparseAdam(list(model.embedding.parameters()), lr=lr),
        optim.Adam(model.fc.parameters(), lr=lr),
    ]


def main(
    argv: list[str] | None = None,
    make_optimizers: Callable[[TextClassifier, float], list[optim.Optimizer]] = make_optimizers,
) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = documents(4096, seed=1)
    test_x, test_y = documents(512, seed=2)
    model = TextClassifier()
    optimizers = make_optimizers(model, args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            acc = (model(test_x).argmax(1) == test_y).float().mean().item()
        print(f"eval {step} test_acc={acc:.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch_size,))
        for opt in optimizers:
            opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        for opt in optimizers:
            opt.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()
