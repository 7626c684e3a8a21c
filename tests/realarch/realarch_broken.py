"""Broken real-architecture setups: one real-world training bug each, with the finding it must produce.

`BROKEN` lists (entrypoint, expected code, expected module or None). Models come from Hugging Face
transformers (small configs, no downloads) or standard torch layers; the bug is the only change
from the matching healthy setup in `realarch_healthy.py`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from realarch_common import (
    BATCH,
    IMAGE,
    VOCAB,
    adamw_cosine,
    adamw_linear_warmup,
    image_batch,
    seed,
    text_batch,
)
from realarch_healthy import SmallCNN, TinyTransformer, _bert_cfg, _transformer_setup, zero_init


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(
        GPT2Config(
            vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=2
        )
    )


def _llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(cfg)


# ------------------------------------------------------------------------- loss and label contract


def gpt2_prompt_masks_every_label() -> dict[str, Any]:
    """SFT data collator masks the prompt with -100; every prompt is longer than max_length, so after
    truncation every label is -100 and the loss has no learning signal."""
    seed(30)
    model = _gpt2()
    batch = text_batch(lm=True, pad_tail=0)
    batch["labels"][:] = -100
    opt, sched = adamw_cosine(model)
    return {"model": model, "batch": batch, "optimizer": opt, "scheduler": sched}


def cnn_softmax_then_cross_entropy() -> dict[str, Any]:
    """The classifier ends in nn.Softmax (copied from an inference script) and trains with CrossEntropyLoss."""
    seed(31)
    model = SmallCNN()
    model.classifier.append(nn.Softmax(dim=1))
    criterion = nn.CrossEntropyLoss()
    batch = (torch.randn(16, 3, IMAGE, IMAGE), torch.randint(0, 10, (16,)))
    return {
        "model": model,
        "batch": batch,
        "loss_fn": lambda m, b: criterion(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.0125, momentum=0.9),
    }


def bert_labels_numbered_from_one() -> dict[str, Any]:
    """A 3-class dataset labelled 1, 2, 3 (as in its CSV) fed to a head with num_labels=3."""
    from transformers import BertForSequenceClassification

    seed(32)
    model = BertForSequenceClassification(_bert_cfg(num_labels=3))
    batch = text_batch(3)
    batch["labels"] = torch.randint(1, 4, (BATCH,))
    batch["labels"][0] = 3
    opt, sched = adamw_linear_warmup(model)
    return {"model": model, "batch": batch, "optimizer": opt, "scheduler": sched}


class WideHeadMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU())
        self.head = nn.Linear(512, 10)
        nn.init.normal_(self.head.weight, std=1.0)  # bug: N(0, 1) instead of the default fan-in scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def mlp_head_initialised_too_large() -> dict[str, Any]:
    seed(33)
    model = WideHeadMLP()
    return {
        "model": model,
        "batch": (torch.randn(64, 64), torch.randint(0, 10, (64,))),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }


def distilbert_regression_broadcast() -> dict[str, Any]:
    """A regression head (num_labels=1, output (B, 1)) with a hand-written MSE against targets of shape (B,):
    (B, 1) - (B,) broadcasts to (B, B)."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    seed(34)
    cfg = DistilBertConfig(
        vocab_size=VOCAB,
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=64,
        num_labels=1,
    )
    model = DistilBertForSequenceClassification(cfg)
    batch = text_batch()
    batch["score"] = torch.rand(BATCH) * 5

    def loss_fn(m: nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
        pred = m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        return ((pred - b["score"]) ** 2).mean()

    opt, sched = adamw_linear_warmup(model)
    return {"model": model, "batch": batch, "loss_fn": loss_fn, "optimizer": opt, "scheduler": sched}


def resnet_log_softmax_over_batch() -> dict[str, Any]:
    """log_softmax(logits, dim=0) then nll_loss: the scores are normalised across the batch."""
    from transformers import ResNetConfig, ResNetForImageClassification

    seed(35)
    model = ResNetForImageClassification(
        ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=5
        )
    )
    batch = image_batch(5)

    def loss_fn(m: nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = m(pixel_values=b["pixel_values"]).logits
        return F.nll_loss(F.log_softmax(logits, dim=0), b["labels"])

    opt = torch.optim.SGD(model.parameters(), lr=0.1 * BATCH / 256, momentum=0.9, weight_decay=1e-4)
    return {"model": model, "batch": batch, "loss_fn": loss_fn, "optimizer": opt}


# ------------------------------------------------------------------------------ train / eval mode


def bert_left_in_eval_mode() -> dict[str, Any]:
    """The training loop evaluates every N steps (model.eval()) and never calls model.train() again."""
    from transformers import BertForSequenceClassification

    seed(36)
    model = BertForSequenceClassification(_bert_cfg(num_labels=2, hidden_dropout_prob=0.2))
    opt, sched = adamw_linear_warmup(model)
    model.eval()  # the evaluation that ran before these steps

    def step_fn(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss = m(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()

    return {"model": model, "batch": text_batch(2), "optimizer": opt, "step_fn": step_fn}


def gpt2_evaluates_with_dropout() -> dict[str, Any]:
    """The validation loop wraps the forward in torch.no_grad() but never calls model.eval()."""
    seed(37)
    model = _gpt2()
    opt, sched = adamw_cosine(model)

    def eval_fn(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            return m(**batch).loss

    return {
        "model": model,
        "batch": text_batch(lm=True),
        "optimizer": opt,
        "scheduler": sched,
        "eval_fn": eval_fn,
    }


# --------------------------------------------------------------------------- gradient accumulation


def _accum_step(opt: Any, sched: Any, accum: int, *, divide: bool, zero_inside: bool) -> Any:
    def step_fn(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        total = torch.zeros(
            (), device=next(m.parameters()).device
        )  # where the model is (CPU here, CUDA in the GPU check)
        for i in range(accum):
            if zero_inside:
                opt.zero_grad(set_to_none=True)  # bug when zero_inside: discards earlier micro-batches
            micro = {k: v[i * (BATCH // accum) : (i + 1) * (BATCH // accum)] for k, v in batch.items()}
            loss = m(**micro).loss
            if divide:
                loss = loss / accum
            loss.backward()
            total += loss.detach()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return total

    return step_fn


def llama_accumulation_loss_not_divided() -> dict[str, Any]:
    """Gradient accumulation over 4 micro-batches without dividing the loss by 4."""
    seed(38)
    model = _llama()
    opt, sched = adamw_cosine(model, lr=3e-4)
    return {
        "model": model,
        "batch": text_batch(lm=True, pad_tail=0),
        "optimizer": opt,
        "step_fn": _accum_step(opt, sched, 4, divide=False, zero_inside=False),
    }


def gpt2_accumulation_zero_grad_inside_loop() -> dict[str, Any]:
    """zero_grad() called inside the accumulation loop: only the last micro-batch's gradient survives."""
    seed(39)
    model = _gpt2()
    opt, sched = adamw_cosine(model)
    return {
        "model": model,
        "batch": text_batch(lm=True, pad_tail=0),
        "optimizer": opt,
        "step_fn": _accum_step(opt, sched, 4, divide=True, zero_inside=True),
    }


def convnext_missing_zero_grad() -> dict[str, Any]:
    """A hand-written loop that never zeroes gradients: they accumulate across steps."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    seed(40)
    cfg = ConvNextConfig(
        num_channels=3, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=5, patch_size=4
    )
    model = ConvNextForImageClassification(cfg)
    opt, sched = adamw_cosine(model, lr=1e-3, betas=(0.9, 0.999), wd=0.05)

    def step_fn(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss = m(**batch).loss
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()

    return {"model": model, "batch": image_batch(5), "optimizer": opt, "step_fn": step_fn}


# ---------------------------------------------------------------------- optimisation and plumbing


def bert_learning_rate_100x() -> dict[str, Any]:
    """AdamW at 5e-3 instead of the recommended 5e-5 for BERT fine-tuning."""
    from transformers import BertForSequenceClassification

    seed(41)
    model = BertForSequenceClassification(_bert_cfg(num_labels=3))
    opt, sched = adamw_linear_warmup(model, lr=5e-3)
    return {"model": model, "batch": text_batch(3), "optimizer": opt, "scheduler": sched}


def swin_learning_rate_typo_low() -> dict[str, Any]:
    """AdamW at 5e-10 (a typo for 5e-4)."""
    from transformers import SwinConfig, SwinForImageClassification

    seed(42)
    cfg = SwinConfig(
        image_size=IMAGE,
        patch_size=4,
        embed_dim=16,
        depths=[1, 1],
        num_heads=[2, 2],
        window_size=4,
        num_labels=5,
    )
    model = SwinForImageClassification(cfg)
    opt, sched = adamw_cosine(model, lr=5e-10, betas=(0.9, 0.999), wd=0.05)
    return {"model": model, "batch": image_batch(5), "optimizer": opt, "scheduler": sched}


def vit_head_replaced_after_optimizer() -> dict[str, Any]:
    """The optimizer is built, then the head is swapped for the new label set: the new head is in no param group."""
    from transformers import ViTConfig, ViTForImageClassification

    seed(43)
    cfg = ViTConfig(
        image_size=IMAGE,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1000,
    )
    model = ViTForImageClassification(cfg)
    opt, sched = adamw_linear_warmup(model, lr=3e-4)
    model.classifier = nn.Linear(32, 5)
    model.num_labels = 5
    model.config.num_labels = 5
    return {"model": model, "batch": image_batch(5), "optimizer": opt, "scheduler": sched}


def t5_encoder_under_no_grad() -> dict[str, Any]:
    """The encoder runs under torch.no_grad() (copied from a feature-extraction script) while the
    whole model is meant to be fine-tuned."""
    from transformers import T5Config, T5ForConditionalGeneration
    from transformers.optimization import Adafactor

    seed(44)
    cfg = T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    model = T5ForConditionalGeneration(cfg)
    batch = text_batch()
    batch["labels"] = torch.randint(3, VOCAB, (BATCH, 8))

    def loss_fn(m: nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            enc = m.encoder(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
        return m(encoder_outputs=enc, attention_mask=b["attention_mask"], labels=b["labels"]).loss

    opt = Adafactor(
        model.parameters(), lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False
    )
    return {"model": model, "batch": batch, "loss_fn": loss_fn, "optimizer": opt}


def resnet_raw_pixels() -> dict[str, Any]:
    """Images fed as raw 0-255 values: the image processor's rescale and normalise step was skipped."""
    from transformers import ResNetConfig, ResNetForImageClassification

    seed(45)
    model = ResNetForImageClassification(
        ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=5
        )
    )
    batch = image_batch(5)
    batch["pixel_values"] = torch.randint(0, 256, (BATCH, 3, IMAGE, IMAGE)).float()
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * BATCH / 256, momentum=0.9, weight_decay=1e-4)
    return {"model": model, "batch": batch, "optimizer": opt}


def gpt2_log_of_softmax_underflow() -> dict[str, Any]:
    """A hand-written token loss log(softmax(logits / T)) with T = 0.01: softmax underflows to 0, log gives -inf."""
    seed(46)
    model = _gpt2()

    def loss_fn(m: nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = m(input_ids=b["input_ids"]).logits[:, :-1] / 0.0001
        probs = torch.softmax(logits, dim=-1)
        picked = probs.gather(-1, b["input_ids"][:, 1:, None]).squeeze(-1)
        return -torch.log(picked).mean()

    opt, sched = adamw_cosine(model)
    return {
        "model": model,
        "batch": text_batch(pad_tail=0),
        "loss_fn": loss_fn,
        "optimizer": opt,
        "scheduler": sched,
    }


def deep_sigmoid_mlp() -> dict[str, Any]:
    """A 12-layer MLP with sigmoid activations (a 1990s recipe): early layers get almost no gradient."""
    seed(47)
    layers: list[nn.Module] = [nn.Linear(32, 64), nn.Sigmoid()]
    for _ in range(11):
        layers += [nn.Linear(64, 64), nn.Sigmoid()]
    layers.append(nn.Linear(64, 4))
    model = nn.Sequential(*layers)
    return {
        "model": model,
        "batch": (torch.randn(64, 32), torch.randint(0, 4, (64,))),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
    }


def zero_init_attention_pair() -> dict[str, Any]:
    """A config pattern meant for the output projections (`attn.proj`, matched by substring) zeroes
    attn.proj_qkv as well as attn.proj_out: a product of two zeros, neither factor ever gets a gradient."""
    seed(23)
    model = TinyTransformer()
    zero_init(model, ("attn.proj", "mlp.fc2", "head"))
    return _transformer_setup(model)


BROKEN: list[tuple[Any, str, str | None]] = [
    (gpt2_prompt_masks_every_label, "labels_all_ignored", "lm_head"),
    (cnn_softmax_then_cross_entropy, "loss_input_mismatch", "classifier.4"),
    (bert_labels_numbered_from_one, "label_out_of_range", "classifier"),
    (mlp_head_initialised_too_large, "initial_loss_off", "head"),
    (distilbert_regression_broadcast, "loss_broadcast", "classifier"),
    (resnet_log_softmax_over_batch, "loss_wrong_axis", "classifier.1"),
    (bert_left_in_eval_mode, "train_mode_off", None),
    (gpt2_evaluates_with_dropout, "dropout_in_eval", None),
    (llama_accumulation_loss_not_divided, "grad_accumulation_mismatch", None),
    (gpt2_accumulation_zero_grad_inside_loop, "grad_accumulation_mismatch", None),
    (convnext_missing_zero_grad, "grad_not_zeroed", None),
    (bert_learning_rate_100x, "update_ratio_high", None),
    (swin_learning_rate_typo_low, "update_ratio_low", None),
    (vit_head_replaced_after_optimizer, "params_not_updated", "classifier"),
    (t5_encoder_under_no_grad, "no_gradient", "encoder"),
    (resnet_raw_pixels, "input_not_normalized", None),
    (gpt2_log_of_softmax_underflow, "nonfinite_loss", None),
    (deep_sigmoid_mlp, "vanishing_gradients", "0"),
    (zero_init_attention_pair, "no_gradient", "blocks.0.attn"),
]
