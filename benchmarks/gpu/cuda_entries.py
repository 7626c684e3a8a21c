"""The real-architecture suite's setups (tests/realarch) moved to CUDA, for the GPU check
(`python benchmarks/gpu/check.py` on a machine with a GPU): same models, optimizers and bugs, on the device."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "realarch"))

import realarch_broken
import realarch_healthy

HEALTHY = ["bert_sequence_classification", "gpt2_language_model", "llama_causal_lm", "t5_conditional_generation",
           "vit_image_classification", "convnext_image_classification", "resnet_sgd_momentum"]  # fmt: skip
BROKEN = {
    "gpt2_prompt_masks_every_label": "labels_all_ignored",
    "cnn_softmax_then_cross_entropy": "loss_input_mismatch",
    "bert_labels_numbered_from_one": "label_out_of_range",
    "distilbert_regression_broadcast": "loss_broadcast",
    "bert_learning_rate_100x": "update_ratio_high",
    "vit_head_replaced_after_optimizer": "params_not_updated",
    "gpt2_log_of_softmax_underflow": "nonfinite_loss",
    "llama_accumulation_loss_not_divided": "grad_accumulation_mismatch",
}


def _to(obj: Any, device: str) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(v, device) for v in obj)
    return obj


def _on_cuda(fn: Any) -> Any:
    def make() -> dict[str, Any]:
        c = dict(fn())
        c["model"].to("cuda")  # parameters move in place: the optimizer built on them still holds them
        for key in ("batch", "batches"):
            if key in c:
                c[key] = _to(c[key], "cuda")
        return c

    make.__name__ = fn.__name__
    return make


for _name in HEALTHY:
    globals()[_name] = _on_cuda(getattr(realarch_healthy, _name))
for _name in BROKEN:
    globals()[_name] = _on_cuda(getattr(realarch_broken, _name))
