"""Save and load model checkpoints, including ones written by older versions of the package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

# parameter names that changed between versions: old substring -> new substring
RENAMES = {
    ".attn.qkv.": ".attn.proj_qkv.",
    ".attn.proj.": ".attn.proj_out.",
}


def upgrade_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        for old, new in RENAMES.items():
            if old in key:
                key = key.replace(old, new)
        out[key] = value
    return out


def save_checkpoint(path: str | Path, model: nn.Module, extra: dict[str, Any] | None = None) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "version": 2, **(extra or {})}, path)


def load_checkpoint(path: str | Path, model: nn.Module, strict: bool = True) -> dict[str, Any]:
    payload = torch.load(path, map_location="cpu", weights_only=False)
    state = payload["model"]
    if payload.get("version", 1) < 2:
        state = upgrade_state_dict(state)
    missing, unexpected = model.load_state_dict(state, strict=strict)
    payload["missing"], payload["unexpected"] = missing, unexpected
    return payload
