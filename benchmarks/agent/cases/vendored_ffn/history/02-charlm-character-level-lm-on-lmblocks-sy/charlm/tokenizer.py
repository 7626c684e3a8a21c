"""Character tokenizer with a few special tokens, saved as JSON next to checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]


class CharTokenizer:
    def __init__(self, chars: list[str]) -> None:
        if len(set(chars)) != len(chars):
            raise ValueError("duplicate characters in the vocabulary")
        self.itos = SPECIALS + list(chars)
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    @classmethod
    def from_text(cls, *texts: str) -> "CharTokenizer":
        return cls(sorted(set("".join(texts))))

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    @property
    def pad_id(self) -> int:
        return self.stoi["<pad>"]

    @property
    def unk_id(self) -> int:
        return self.stoi["<unk>"]

    @property
    def eos_id(self) -> int:
        return self.stoi["<eos>"]

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = [self.stoi.get(ch, self.unk_id) for ch in text]
        if add_bos:
            ids.insert(0, self.stoi["<bos>"])
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        out = []
        for i in ids:
            token = self.itos[i] if 0 <= i < len(self.itos) else "<unk>"
            if skip_special and token in SPECIALS:
                continue
            out.append(token)
        return "".join(out)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"chars": self.itos[len(SPECIALS) :]}))

    @classmethod
    def load(cls, path: str | Path) -> "CharTokenizer":
        return cls(json.loads(Path(path).read_text())["chars"])
