"""Save and load model checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn


def save_checkpoint(path: str | Path, model: nn.Module, extra: dict[str, Any] | None = None) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), **(extra or {})}, path)


def load_checkpoint(path: str | Path, model: nn.Module, strict: bool = True) -> dict[str, Any]:
    payload = torch.load(path, map_location="cpu", weights_only=False)
    missing, unexpected = model.load_state_dict(payload["model"], strict=strict)
    payload["missing"], payload["unexpected"] = missing, unexpected
    return payload
