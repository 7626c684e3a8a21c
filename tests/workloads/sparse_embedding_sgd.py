"""Skip-gram word embeddings with negative sampling, sparse gradients and plain SGD (Mikolov et al.
2013, "Distributed Representations of Words and Phrases"; a common PyTorch word2vec layout).

Two `nn.Embedding(sparse=True)` tables (centre and context words); the loss is
-log sigmoid(u.v) - sum log sigmoid(-u.v_neg) over 5 negatives; `optim.SGD(lr=5)` takes the sparse
gradients directly (no momentum, as sparse SGD requires). The health metric is the loss on a fixed
held-out set of pairs and negatives (`test_loss`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import markov_text
from torch import nn, optim

VOCAB, EMBED, WINDOW, NEGATIVES = 40, 16, 2, 5


def skipgram_pairs(tokens: torch.Tensor) -> torch.Tensor:
    pairs = [torch.stack([tokens[:-k], tokens[k:]], dim=1) for k in range(1, WINDOW + 1)]
    pairs += [p.flip(1) for p in pairs]
    return torch.cat(pairs)


class SkipGram(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.center = nn.Embedding(VOCAB, EMBED, sparse=True)
        self.context = nn.Embedding(VOCAB, EMBED, sparse=True)
        nn.init.uniform_(self.center.weight, -0.5 / EMBED, 0.5 / EMBED)
        nn.init.zeros_(self.context.weight)

    def forward(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        u = self.center(center)
        pos = (u * self.context(context)).sum(-1)
        neg = torch.bmm(self.context(negatives), u.unsqueeze(2)).squeeze(2)
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(1)).mean()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    pairs = skipgram_pairs(markov_text(20000, VOCAB, seed=1))
    test_pairs = skipgram_pairs(markov_text(1000, VOCAB, seed=2))[:1024]
    test_neg = torch.randint(
        0, VOCAB, (len(test_pairs), NEGATIVES), generator=torch.Generator().manual_seed(3)
    )
    model = SkipGram()
    optimizer = optim.SGD(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            print(f"eval {step} test_loss={model(test_pairs[:, 0], test_pairs[:, 1], test_neg).item():.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        batch = pairs[torch.randint(0, len(pairs), (args.batch_size,))]
        negatives = torch.randint(0, VOCAB, (args.batch_size, NEGATIVES))
        optimizer.zero_grad()
        loss = model(batch[:, 0], batch[:, 1], negatives)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()
