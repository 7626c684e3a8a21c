"""A GRU language model whose output layer shares the input embedding's weight (Press & Wolf 2017,
"Using the Output Embedding to Improve Language Models"; the `--tied` option of pytorch/examples
word_language_model).

`decoder.weight = encoder.weight`: one parameter receives gradient from both ends of the model and
appears once in `model.parameters()`. AdamW 3e-3 with a linear warm-up then cosine decay (LambdaLR),
gradient clipping at 1.0. The health metric is the validation cross-entropy (`val_loss`, lower is
better).
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from synthetic import markov_text
from torch import nn, optim

VOCAB, DIM, SEQ = 40, 48, 24


class TiedGRULM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.GRU(DIM, DIM, batch_first=True)
        self.decoder = nn.Linear(DIM, VOCAB)
        self.decoder.weight = self.encoder.weight  # weight tying
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)  # as word_language_model initialises it
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        output, _ = self.rnn(self.encoder(tokens))
        return self.decoder(output)


def windows(stream: torch.Tensor, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(0, len(stream) - SEQ - 1, (n,), generator=g)
    idx = starts[:, None] + torch.arange(SEQ + 1)[None, :]
    chunk = stream[idx]
    return chunk[:, :-1], chunk[:, 1:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_stream, val_stream = markov_text(40000, VOCAB, seed=1), markov_text(4000, VOCAB, seed=2)
    val_x, val_y = windows(val_stream, 128, torch.Generator().manual_seed(3))
    model = TiedGRULM()
    assert model.decoder.weight is model.encoder.weight
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    def lr_lambda(step: int) -> float:
        if step < args.warmup:
            return (step + 1) / args.warmup
        progress = (step - args.warmup) / max(1, args.steps - args.warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    scheduler = optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    g = torch.Generator().manual_seed(args.seed)

    def evaluate(step: int) -> None:
        with torch.no_grad():
            loss = F.cross_entropy(model(val_x).reshape(-1, VOCAB), val_y.reshape(-1))
        print(f"eval {step} val_loss={loss.item():.4f}")

    evaluate(0)
    for step in range(1, args.steps + 1):
        x, y = windows(train_stream, args.batch_size, g)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss={loss.item():.4f} lr={scheduler.get_last_lr()[0]:.6f}")
    evaluate(args.steps)


if __name__ == "__main__":
    main()
