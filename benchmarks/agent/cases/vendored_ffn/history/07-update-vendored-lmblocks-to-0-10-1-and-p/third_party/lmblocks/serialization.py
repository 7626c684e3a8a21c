# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Saving and loading models as a folder: ``config.json`` + ``model.pt``.

State dicts written by lmblocks <= 0.9 (GPT-2 style names, fused ``c_attn``) are converted on load.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from .configuration import LMConfig

FORMAT_VERSION = 2

_RENAMES_V1 = [
    (".ln_1.", ".norm_attn."),
    (".ln_2.", ".norm_ffn."),
    (".mlp.c_fc.", ".ffn.fc_in."),
    (".mlp.c_proj.", ".ffn.fc_out."),
    (".attn.c_proj.", ".attn.o_proj."),
    ("ln_f.", "norm_out."),
    ("wte.", "tok_emb."),
    ("wpe.", "pos_emb."),
]


def convert_v1_state_dict(state: dict[str, torch.Tensor], config: LMConfig) -> dict[str, torch.Tensor]:
    """Map a format-1 (lmblocks <= 0.9) state dict to the current parameter names."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if ".attn.c_attn." in key:
            q_dim = config.n_heads * config.attn_head_dim
            kv_dim = config.kv_heads * config.attn_head_dim
            q, k, v = value.split([q_dim, kv_dim, kv_dim], dim=0)
            for name, part in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
                out[key.replace("c_attn", name)] = part.clone()
            continue
        for old, new in _RENAMES_V1:
            key = key.replace(old, new) if old in key or key.startswith(old) else key
        out[key] = value
    return out


def save_pretrained(model: nn.Module, folder: str | Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save(folder / "config.json")
    torch.save({"format": FORMAT_VERSION, "state_dict": model.state_dict()}, folder / "model.pt")


def load_pretrained(folder: str | Path, model_cls: type[nn.Module] | None = None, strict: bool = True) -> nn.Module:
    from .modeling import TransformerLM

    folder = Path(folder)
    config = LMConfig.load(folder / "config.json")
    model = (model_cls or TransformerLM)(config)
    payload = torch.load(folder / "model.pt", map_location="cpu", weights_only=True)
    if isinstance(payload, dict) and "state_dict" in payload:
        state, fmt = payload["state_dict"], payload.get("format", 1)
    else:
        state, fmt = payload, 1
    if fmt < 2:
        state = convert_v1_state_dict(state, config)
    model.load_state_dict(state, strict=strict)
    return model
