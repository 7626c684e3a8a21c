"""Configuration: JSON files mapped onto dataclasses, with ``--set section.key=value`` overrides."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class DataConfig:
    n_subjects: int = 20
    windows_per_subject: int = 150
    seed: int = 0
    noise: float = 0.05
    val_subjects: int = 3
    test_subjects: int = 3
    batch_size: int = 32


@dataclass
class ModelConfig:
    backbone: str = "resnet1d"
    backbone_args: dict[str, Any] = field(default_factory=dict)
    pool: str = "attention"
    tasks: list[str] = field(default_factory=lambda: ["activity"])


@dataclass
class LossConfig:
    label_smoothing: float = 0.05
    weights: dict[str, float] = field(default_factory=lambda: {"activity": 1.0})


@dataclass
class TrainConfig:
    epochs: int = 12
    lr: float = 2e-3
    weight_decay: float = 1e-2
    warmup_epochs: int = 1
    grad_clip: float | None = 1.0
    seed: int = 0
    patience: int = 5
    monitor: str = "val_score"
    out_dir: str | None = None


@dataclass
class Config:
    name: str = "default"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


SECTIONS = {"data": DataConfig, "model": ModelConfig, "loss": LossConfig, "train": TrainConfig}


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("weights", "backbone_args"):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read(path: Path) -> dict[str, Any]:
    raw = json.loads(path.read_text())
    parent = raw.pop("extends", None)
    return _merge(_read(path.parent / parent), raw) if parent else raw


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def from_dict(raw: dict[str, Any]) -> Config:
    unknown = sorted(set(raw) - set(SECTIONS) - {"name"})
    if unknown:
        raise ValueError(f"unknown config section(s): {', '.join(unknown)}")
    sections = {}
    for key, cls in SECTIONS.items():
        values = raw.get(key) or {}
        names = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(values) - names)
        if bad:
            raise ValueError(f"unknown key(s) in {key}: {', '.join(bad)}")
        sections[key] = cls(**values)
    return Config(name=raw.get("name", "default"), **sections)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    raw = _read(Path(path)) if path else {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise ValueError(f"override must look like section.key=value, got {item!r}")
        section, name = key.split(".", 1)
        raw.setdefault(section, {})[name] = _value(value)
    return from_dict(raw)


def to_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
