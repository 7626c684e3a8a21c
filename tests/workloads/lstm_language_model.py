"""A word-level LSTM language model with truncated BPTT and gradient clipping (after pytorch/examples
word_language_model, scaled down; the corpus is a synthetic Markov-chain text).

Embedding -> 2-layer LSTM -> Linear decoder with dropout 0.2; the hidden state is carried across
chunks and detached at each one; `clip_grad_norm_(0.25)`, and the example's default update: plain
SGD by hand with lr 20 (`p.data.add_(p.grad, alpha=-lr)`), no optimizer object. The health metric is
the validation cross-entropy (`val_loss`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
from synthetic import batchify, markov_text
from torch import nn

VOCAB, EMSIZE, NHID, NLAYERS = 40, 32, 64, 2


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.2) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(
        self, input: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output))
        return decoded.view(-1, decoded.size(-1)), hidden

    def init_hidden(self, bsz: int) -> tuple[torch.Tensor, torch.Tensor]:
        weight = next(self.parameters())
        return weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60, help="BPTT chunks")
    parser.add_argument("--lr", type=float, default=20.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--bptt", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_data = batchify(markov_text(40000, VOCAB, seed=1), args.batch_size)
    val_data = batchify(markov_text(4000, VOCAB, seed=2), 10)
    model = RNNModel(VOCAB, EMSIZE, NHID, NLAYERS)
    criterion = nn.CrossEntropyLoss()

    def get_batch(source: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        seq_len = min(args.bptt, len(source) - 1 - i)
        return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)

    def evaluate(step: int) -> None:
        model.eval()
        hidden, total = model.init_hidden(10), 0.0
        with torch.no_grad():
            for i in range(0, val_data.size(0) - 1, args.bptt):
                data, targets = get_batch(val_data, i)
                output, hidden = model(data, hidden)
                total += len(data) * criterion(output, targets).item()
        print(f"eval {step} val_loss={total / (len(val_data) - 1):.4f}")
        model.train()

    evaluate(0)
    hidden = model.init_hidden(args.batch_size)
    i = 0
    for step in range(1, args.steps + 1):
        if i >= train_data.size(0) - 2:
            i, hidden = 0, model.init_hidden(args.batch_size)
        data, targets = get_batch(train_data, i)
        i += args.bptt
        # Detach the hidden state from how it was produced, or backprop runs to the start of the data.
        hidden = (hidden[0].detach(), hidden[1].detach())
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-args.lr)
        print(f"step {step} loss={loss.item():.4f}")
    evaluate(args.steps)


if __name__ == "__main__":
    main()
