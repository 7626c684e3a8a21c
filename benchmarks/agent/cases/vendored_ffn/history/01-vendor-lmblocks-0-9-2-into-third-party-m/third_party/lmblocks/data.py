# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Data helpers: packing documents into fixed-length sequences, padding collation."""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import torch


def pack_documents(docs: Iterable[Sequence[int]], seq_len: int, eos_id: int) -> Iterator[torch.Tensor]:
    """Concatenate documents separated by ``eos_id`` and cut the stream into ``seq_len + 1`` chunks
    (inputs and next-token labels overlap by one). The last partial chunk is dropped."""
    buffer: list[int] = []
    for doc in docs:
        buffer.extend(doc)
        buffer.append(eos_id)
        while len(buffer) >= seq_len + 1:
            yield torch.tensor(buffer[: seq_len + 1])
            buffer = buffer[seq_len:]


def split_inputs_labels(chunk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return chunk[..., :-1], chunk[..., 1:]


def pad_collate(
    batch: Sequence[Sequence[int]], pad_id: int, ignore_index: int = -100, max_len: int | None = None
) -> dict[str, torch.Tensor]:
    """Right-pad variable-length sequences; returns input_ids, labels (ignore_index on padding) and
    attention_mask."""
    length = max(len(s) for s in batch)
    if max_len is not None:
        length = min(length, max_len + 1)
    ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.long)
    for i, seq in enumerate(batch):
        seq = list(seq)[:length]
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
    labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, ignore_index)
    return {"input_ids": ids[:, :-1], "labels": labels, "attention_mask": mask[:, :-1]}


class RandomWindows(torch.utils.data.IterableDataset):
    """Endless random windows of one long token tensor (for language-model pre-training)."""

    def __init__(self, tokens: torch.Tensor, seq_len: int, seed: int = 0) -> None:
        super().__init__()
        self.tokens = tokens
        self.seq_len = seq_len
        self.seed = seed

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = torch.utils.data.get_worker_info()
        gen = torch.Generator().manual_seed(self.seed + (info.id if info else 0))
        high = len(self.tokens) - self.seq_len - 1
        while True:
            i = int(torch.randint(0, high, (), generator=gen))
            chunk = self.tokens[i : i + self.seq_len + 1]
            yield chunk[:-1], chunk[1:]
