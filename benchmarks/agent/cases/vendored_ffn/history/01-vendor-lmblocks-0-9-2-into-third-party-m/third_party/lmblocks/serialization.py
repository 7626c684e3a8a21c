# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Saving and loading models as a folder: ``config.json`` + ``model.pt``."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from .configuration import LMConfig


def save_pretrained(model: nn.Module, folder: str | Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save(folder / "config.json")
    torch.save(model.state_dict(), folder / "model.pt")


def load_pretrained(folder: str | Path, model_cls: type[nn.Module] | None = None, strict: bool = True) -> nn.Module:
    from .modeling import TransformerLM

    folder = Path(folder)
    config = LMConfig.load(folder / "config.json")
    model = (model_cls or TransformerLM)(config)
    model.load_state_dict(torch.load(folder / "model.pt", map_location="cpu", weights_only=True), strict=strict)
    return model
