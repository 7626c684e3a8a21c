# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""A byte-level BPE tokenizer (GPT-2 style merges over UTF-8 bytes), trainable on a text sample.

Small and dependency-free rather than fast: training is O(merges x corpus) and meant for corpora of
a few megabytes. Use a production tokenizer for anything larger.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

# split text into words, numbers, punctuation runs and whitespace before merging (GPT-2 pattern,
# simplified to what the stdlib ``re`` supports)
PRETOKENIZE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


class BPETokenizer:
    def __init__(self, merges: list[tuple[int, int]] | None = None, specials: list[str] | None = None) -> None:
        self.merges: dict[tuple[int, int], int] = {}
        self.vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
        for pair in merges or []:
            self._add_merge(pair)
        self.specials: dict[str, int] = {}
        for token in specials or []:
            self.add_special(token)

    # ------------------------------------------------------------------ vocabulary
    def _add_merge(self, pair: tuple[int, int]) -> int:
        new_id = 256 + len(self.merges)
        self.merges[pair] = new_id
        self.vocab[new_id] = self.vocab[pair[0]] + self.vocab[pair[1]]
        return new_id

    def add_special(self, token: str) -> int:
        if token not in self.specials:
            self.specials[token] = 256 + len(self.merges) + len(self.specials) + 10_000
        return self.specials[token]

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.merges) + len(self.specials)

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, text: str, vocab_size: int, specials: list[str] | None = None, verbose: bool = False) -> "BPETokenizer":
        if vocab_size < 256:
            raise ValueError("vocab_size must be at least 256 (the byte alphabet)")
        tok = cls(specials=None)
        words = Counter(PRETOKENIZE.findall(text))
        seqs = {w: list(w.encode("utf-8")) for w in words}
        for step in range(vocab_size - 256 - len(specials or [])):
            pairs: Counter[tuple[int, int]] = Counter()
            for word, count in words.items():
                ids = seqs[word]
                for a, b in zip(ids, ids[1:]):
                    pairs[(a, b)] += count
            if not pairs:
                break
            best, freq = pairs.most_common(1)[0]
            if freq < 2:
                break
            new_id = tok._add_merge(best)
            for word in words:
                seqs[word] = _merge(seqs[word], best, new_id)
            if verbose and step % 100 == 0:
                print(f"merge {step}: {tok.vocab[new_id]!r} ({freq})")
        for token in specials or []:
            tok.add_special(token)
        return tok

    # ------------------------------------------------------------------ encode / decode
    def _encode_word(self, word: str) -> list[int]:
        ids = list(word.encode("utf-8"))
        while len(ids) > 1:
            candidates = [(self.merges.get(p, 1 << 30), p) for p in zip(ids, ids[1:])]
            rank, pair = min(candidates)
            if rank == 1 << 30:
                break
            ids = _merge(ids, pair, self.merges[pair])
        return ids

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        if self.specials:
            pattern = "(" + "|".join(re.escape(s) for s in sorted(self.specials, key=len, reverse=True)) + ")"
            pieces = re.split(pattern, text)
        else:
            pieces = [text]
        for piece in pieces:
            if piece in self.specials:
                out.append(self.specials[piece])
            elif piece:
                for word in PRETOKENIZE.findall(piece):
                    out.extend(self._encode_word(word))
        return out

    def decode(self, ids: list[int]) -> str:
        inverse = {v: k for k, v in self.specials.items()}
        chunks = []
        for i in ids:
            if i in inverse:
                chunks.append(inverse[i].encode("utf-8"))
            else:
                chunks.append(self.vocab[i])
        return b"".join(chunks).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        data = {"merges": [list(p) for p in self.merges], "specials": list(self.specials)}
        Path(path).write_text(json.dumps(data))

    @classmethod
    def load(cls, path: str | Path) -> "BPETokenizer":
        data = json.loads(Path(path).read_text())
        return cls([tuple(p) for p in data["merges"]], data.get("specials", []))


def _merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
