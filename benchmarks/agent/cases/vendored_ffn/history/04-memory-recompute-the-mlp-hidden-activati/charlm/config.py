"""Run configuration: a JSON file (optionally inheriting from another with ``"base"``) plus
``--set section.key=value`` overrides on the command line."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class OptimConfig:
    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    warmup: int = 50
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0


@dataclass
class MemoryConfig:
    # recompute the feed-forward hidden activation in backward instead of storing it
    ffn_recompute: bool = False


@dataclass
class RunConfig:
    name: str = "run"
    seed: int = 0
    steps: int = 1000
    batch_size: int = 32
    seq_len: int = 64
    eval_every: int = 100
    eval_batches: int = 20
    log_every: int = 25
    data_dir: str = "data/facts"
    out_dir: str | None = None
    corpus: dict[str, Any] = field(default_factory=lambda: {"n_people": 60, "seed": 0})
    model: dict[str, Any] = field(default_factory=dict)
    optim: OptimConfig = field(default_factory=OptimConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _read(path: Path) -> dict[str, Any]:
    raw = json.loads(path.read_text())
    parent = raw.pop("base", None)
    return _merge(_read(path.parent / parent), raw) if parent else raw


def _coerce(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    raw = _read(Path(path))
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"override must be key=value, got {item!r}")
        node = raw
        *parents, leaf = key.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = _coerce(value)
    return from_dict(raw)


def from_dict(raw: dict[str, Any]) -> RunConfig:
    raw = dict(raw)
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"unknown config key(s): {', '.join(unknown)}")
    optim = OptimConfig(**{k: tuple(v) if k == "betas" else v for k, v in raw.pop("optim", {}).items()})
    memory = MemoryConfig(**raw.pop("memory", {}))
    return RunConfig(**raw, optim=optim, memory=memory)


def to_dict(cfg: RunConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
