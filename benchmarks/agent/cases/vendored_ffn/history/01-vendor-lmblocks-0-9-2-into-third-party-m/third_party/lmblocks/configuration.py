# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Model configuration: one dataclass that every module reads its hyper-parameters from."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NORM_TYPES = ("layernorm", "rmsnorm", "scalenorm")
POS_TYPES = ("learned", "sinusoidal", "rotary", "alibi", "none")
INIT_SCHEMES = ("normal", "scaled", "small")


@dataclass
class LMConfig:
    """Hyper-parameters of a decoder-only transformer language model (GPT-2 layout)."""

    vocab_size: int = 256
    max_seq_len: int = 512
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    mlp_ratio: float = 4.0
    activation: str = "gelu"
    norm_type: str = "layernorm"
    norm_eps: float = 1e-5
    pos_type: str = "learned"
    rotary_base: float = 10000.0
    rotary_pct: float = 1.0
    bias: bool = True
    tie_embeddings: bool = True
    pre_norm: bool = True
    dropout: float = 0.0
    attn_dropout: float = 0.0
    emb_dropout: float = 0.0
    init_scheme: str = "scaled"
    init_std: float = 0.02
    use_sdpa: bool = True
    pad_token_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ derived sizes
    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def mlp_hidden(self) -> int:
        return int(self.mlp_ratio * self.d_model)

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        problems = []
        if self.norm_type not in NORM_TYPES:
            problems.append(f"norm_type {self.norm_type!r} not in {NORM_TYPES}")
        if self.pos_type not in POS_TYPES:
            problems.append(f"pos_type {self.pos_type!r} not in {POS_TYPES}")
        if self.init_scheme not in INIT_SCHEMES:
            problems.append(f"init_scheme {self.init_scheme!r} not in {INIT_SCHEMES}")
        if self.d_model % self.n_heads:
            problems.append(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.pos_type == "rotary" and (self.head_dim * self.rotary_pct) % 2:
            problems.append("rotary dimensions must be even")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.attn_dropout < 1.0:
            problems.append("dropout rates must be in [0, 1)")
        if problems:
            raise ValueError("invalid LMConfig: " + "; ".join(problems))

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "LMConfig":
        values = dict(values)
        renamed = {"n_embd": "d_model", "n_layer": "n_layers", "n_head": "n_heads", "block_size": "max_seq_len"}
        for old, new in renamed.items():
            if old in values:
                values[new] = values.pop(old)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown LMConfig field(s): {', '.join(unknown)}")
        return cls(**values)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> "LMConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def replace(self, **changes: Any) -> "LMConfig":
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, dict[str, Any]] = {
    "nano": {"d_model": 128, "n_layers": 2, "n_heads": 4, "max_seq_len": 256},
    "micro": {"d_model": 192, "n_layers": 4, "n_heads": 6, "max_seq_len": 256},
    "tiny": {"d_model": 256, "n_layers": 6, "n_heads": 8, "max_seq_len": 512},
    "small": {"d_model": 512, "n_layers": 8, "n_heads": 8, "max_seq_len": 1024},
    "modern": {
        "norm_type": "rmsnorm",
        "pos_type": "rotary",
        "bias": False,
    },
}


def preset(name: str, **overrides: Any) -> LMConfig:
    """A named configuration; several presets can be combined with ``+`` (``"tiny+modern"``)."""
    values: dict[str, Any] = {}
    for part in name.split("+"):
        if part not in PRESETS:
            raise KeyError(f"unknown preset {part!r}; known: {', '.join(sorted(PRESETS))}")
        values.update(PRESETS[part])
    values.update(overrides)
    return LMConfig(**values)
