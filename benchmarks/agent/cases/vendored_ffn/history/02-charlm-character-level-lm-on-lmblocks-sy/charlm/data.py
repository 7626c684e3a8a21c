"""Token streams and random training windows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from charlm.corpus import Corpus, load_corpus, make_corpus, save_corpus
from charlm.tokenizer import CharTokenizer


class TokenStream:
    """One long tensor of token ids; ``batch`` draws random windows and their next-token labels."""

    def __init__(self, ids: torch.Tensor, seq_len: int) -> None:
        if ids.dim() != 1:
            raise ValueError("TokenStream expects a 1-D tensor of ids")
        if len(ids) <= seq_len + 1:
            raise ValueError(f"stream of {len(ids)} tokens is too short for seq_len {seq_len}")
        self.ids = ids
        self.seq_len = seq_len

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(self.ids) - self.seq_len - 1, (batch_size,), generator=generator)
        offsets = torch.arange(self.seq_len)
        x = self.ids[starts[:, None] + offsets]
        y = self.ids[starts[:, None] + offsets + 1]
        return x, y

    def sequential(self, batch_size: int, max_batches: int | None = None):
        """Non-overlapping windows in order, for evaluation."""
        n = (len(self.ids) - 1) // self.seq_len
        windows = torch.arange(n) * self.seq_len
        for b, i in enumerate(range(0, n, batch_size)):
            if max_batches is not None and b >= max_batches:
                break
            starts = windows[i : i + batch_size]
            offsets = torch.arange(self.seq_len)
            yield self.ids[starts[:, None] + offsets], self.ids[starts[:, None] + offsets + 1]


@dataclass
class DataBundle:
    corpus: Corpus
    tokenizer: CharTokenizer
    train: TokenStream
    val: TokenStream


def prepare_data(data_dir: str | Path, seq_len: int, corpus_args: dict | None = None) -> DataBundle:
    """Load the corpus from ``data_dir`` (generating it there on first use) and tokenise it."""
    data_dir = Path(data_dir)
    corpus_args = corpus_args or {}
    if (data_dir / "facts.json").exists():
        corpus = load_corpus(data_dir)
        if any(corpus.meta.get(k) != v for k, v in corpus_args.items() if k != "seed") or (
            "seed" in corpus_args and corpus.seed != corpus_args["seed"]
        ):
            corpus = make_corpus(**corpus_args)
            save_corpus(corpus, data_dir)
    else:
        corpus = make_corpus(**corpus_args)
        save_corpus(corpus, data_dir)
    tokenizer = CharTokenizer.from_text(corpus.text_train, corpus.text_val)
    train = TokenStream(torch.tensor(tokenizer.encode(corpus.text_train)), seq_len)
    val = TokenStream(torch.tensor(tokenizer.encode(corpus.text_val)), seq_len)
    return DataBundle(corpus, tokenizer, train, val)
