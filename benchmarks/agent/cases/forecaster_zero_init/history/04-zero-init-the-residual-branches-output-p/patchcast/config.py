"""Experiment configuration: dataclasses filled from YAML files.

A config file may name a parent with ``base: other.yaml`` (resolved next to it); the child's keys
override the parent's, section by section. Unknown keys are an error, so a typo never silently
falls back to a default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchcast.utils import yamlish


@dataclass
class DataConfig:
    name: str = "seasonal_mix"
    params: dict[str, Any] = field(default_factory=dict)
    val_frac: float = 0.1
    test_frac: float = 0.2
    scale: bool = True
    batch_size: int = 64
    eval_batch_size: int = 256
    train_stride: int = 1
    eval_stride: int = 4


@dataclass
class ModelConfig:
    name: str = "patchtst"
    lookback: int = 96
    horizon: int = 24
    patch_len: int = 16
    stride: int = 8
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.1
    attn_dropout: float = 0.0
    head_dropout: float = 0.0
    pre_norm: bool = True
    revin: bool = True
    decomposition_kernel: int = 25
    init_std: float = 0.02
    # names of submodules whose weights start at zero (matched against module names)
    zero_init: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimConfig:
    name: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.95)
    schedule: str = "cosine"
    warmup_steps: int = 100
    min_lr_ratio: float = 0.05
    grad_clip: float = 1.0


@dataclass
class TrainConfig:
    epochs: int = 20
    max_steps: int | None = None
    log_every: int = 50
    seed: int = 0
    out_dir: str | None = None
    loss: str = "mse"


@dataclass
class ExperimentConfig:
    name: str = "unnamed"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


SECTIONS = {"data": DataConfig, "model": ModelConfig, "optim": OptimConfig, "train": TrainConfig}


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "params":
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    path = path.resolve()
    if path in seen:
        raise ValueError(f"config inheritance loops through {path}")
    raw = yamlish.load(path) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: the top level must be a mapping")
    parent = raw.pop("base", None)
    if parent:
        raw = _merge(_read(path.parent / parent, (*seen, path)), raw)
    return raw


def _section(cls: type, values: dict[str, Any], where: str) -> Any:
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"unknown key(s) in {where}: {', '.join(unknown)}")
    kwargs = {}
    for key, value in values.items():
        if key == "betas" and isinstance(value, list):
            value = tuple(value)
        kwargs[key] = value
    return cls(**kwargs)


def from_dict(raw: dict[str, Any]) -> ExperimentConfig:
    unknown = sorted(set(raw) - set(SECTIONS) - {"name"})
    if unknown:
        raise ValueError(f"unknown top-level key(s): {', '.join(unknown)}")
    sections = {key: _section(cls, raw.get(key) or {}, key) for key, cls in SECTIONS.items()}
    return ExperimentConfig(name=raw.get("name", "unnamed"), **sections)


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read ``path`` (following ``base:``) and apply ``section.key=value`` overrides."""
    raw = _read(Path(path))
    for item in overrides or []:
        dotted, sep, value = item.partition("=")
        if not sep or "." not in dotted:
            raise ValueError(f"override must look like section.key=value, got {item!r}")
        section, key = dotted.split(".", 1)
        raw.setdefault(section, {})
        node = raw[section]
        *parents, leaf = key.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = yamlish.parse_scalar(value)
    return from_dict(raw)


def to_dict(cfg: ExperimentConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
