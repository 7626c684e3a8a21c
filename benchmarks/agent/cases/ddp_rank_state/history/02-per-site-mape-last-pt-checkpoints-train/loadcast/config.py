"""Run configuration: defaults, a JSON file, then command-line flags."""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RunConfig:
    n_sites: int = 16
    hours_per_site: int = 24 * 126  # 18 weeks per site in the development data
    data_seed: int = 0
    train_frac: float = 0.8
    batch_size: int = 512  # global: split over the ranks
    epochs: int = 3
    lr: float = 3e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 50
    grad_clip: float = 1.0
    width: int = 64
    depth: int = 3
    dropout: float = 0.0
    seed: int = 0
    out_dir: str | None = None


def parse_args(argv: list[str] | None = None) -> RunConfig:
    p = argparse.ArgumentParser(description="Train the building-load model (python or torchrun).")
    p.add_argument("--config", type=Path, default=None, help="JSON file with RunConfig fields")
    for f in dataclasses.fields(RunConfig):
        kind = {"int": int, "float": float, "str | None": str}.get(str(f.type), str)
        p.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=kind, default=None)
    args = p.parse_args(argv)
    values = json.loads(args.config.read_text()) if args.config else {}
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        p.error(f"unknown key(s) in {args.config}: {', '.join(unknown)}")
    for name in known:
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    return RunConfig(**values)
