"""Build the lmblocks model for a run config and apply the local patches it asks for."""

from __future__ import annotations

from lmblocks import LMConfig, TransformerLM, enable_gradient_checkpointing
from lmblocks.utils import parameter_summary

from charlm import patches
from charlm.config import RunConfig

DEFAULT_MODEL = {"d_model": 128, "n_layers": 4, "n_heads": 4, "dropout": 0.0}


def build_model(cfg: RunConfig, vocab_size: int, pad_id: int | None = None) -> TransformerLM:
    values = {**DEFAULT_MODEL, **cfg.model, "vocab_size": vocab_size, "pad_token_id": pad_id}
    values.setdefault("max_seq_len", max(cfg.seq_len, 128))
    model = TransformerLM(LMConfig.from_dict(values))
    if cfg.memory.ffn_recompute:
        patches.enable_ffn_recompute()
    else:
        patches.disable_ffn_recompute()
    if cfg.memory.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model


def describe(model: TransformerLM) -> str:
    c = model.config
    head = (
        f"lmblocks TransformerLM: d_model {c.d_model}, {c.n_layers} layers, {c.n_heads} heads, "
        f"ffn {c.ffn_type} x{c.ffn_mult:g}, {model.num_parameters():,} parameters"
    )
    return head + "\n" + parameter_summary(model, depth=1)
