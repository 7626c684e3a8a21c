"""Shared pieces of the real-architecture suite: tiny configs, data, the optimizers their docs recommend.

Every setup is a probe entrypoint (a function returning the contract mapping). Models come from
Hugging Face transformers built from small configs (random weights, nothing downloaded) or from
standard torch layers; optimizers and schedules follow each family's documentation or paper
(AdamW with linear warmup for BERT fine-tuning, AdamW with cosine decay for GPT/Llama pre-training,
Adafactor for T5, SGD with momentum for ResNet, AdamW with warmup for ConvNeXt/Swin/ViT).
"""

from __future__ import annotations

from typing import Any

import torch

VOCAB = 128
SEQ = 16
BATCH = 8
IMAGE = 32


def seed(n: int = 0) -> None:
    torch.manual_seed(n)


def text_batch(labels: int | None = None, *, lm: bool = False, pad_tail: int = 3) -> dict[str, torch.Tensor]:
    """Token ids with a padded tail and an attention mask; sequence labels or LM labels."""
    ids = torch.randint(3, VOCAB, (BATCH, SEQ))
    mask = torch.ones_like(ids)
    if pad_tail:
        ids[: BATCH // 2, -pad_tail:] = 0
        mask[: BATCH // 2, -pad_tail:] = 0
    batch = {"input_ids": ids, "attention_mask": mask}
    if lm:
        lab = ids.clone()
        lab[mask == 0] = -100
        batch["labels"] = lab
    elif labels is not None:
        batch["labels"] = torch.randint(0, labels, (BATCH,))
    return batch


def image_batch(labels: int = 5, *, size: int = IMAGE, channels: int = 3) -> dict[str, torch.Tensor]:
    """Normalised pixel values (like an image processor's output) and class labels."""
    return {
        "pixel_values": torch.randn(BATCH, channels, size, size),
        "labels": torch.randint(0, labels, (BATCH,)),
    }


def no_decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """The usual split: no weight decay on biases and normalisation weights."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (rest if p.ndim < 2 or "norm" in name.lower() else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def adamw_linear_warmup(model: torch.nn.Module, lr: float = 5e-5, warmup: int = 2, total: int = 100) -> tuple:
    from transformers import get_linear_schedule_with_warmup

    opt = torch.optim.AdamW(no_decay_groups(model, 0.01), lr=lr)
    return opt, get_linear_schedule_with_warmup(opt, warmup, total)


def adamw_cosine(
    model: torch.nn.Module, lr: float = 6e-4, warmup: int = 2, total: int = 100, betas=(0.9, 0.95), wd=0.1
) -> tuple:
    from transformers import get_cosine_schedule_with_warmup

    opt = torch.optim.AdamW(no_decay_groups(model, wd), lr=lr, betas=betas)
    return opt, get_cosine_schedule_with_warmup(opt, warmup, total)
