"""Healthy real-architecture setups: the probe must report no warning or error on any of them."""

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
    SEQ,
    VOCAB,
    adamw_cosine,
    adamw_linear_warmup,
    image_batch,
    no_decay_groups,
    seed,
    text_batch,
)

# ------------------------------------------------------------------------------------------ text


def _bert_cfg(**kw: Any) -> Any:
    from transformers import BertConfig

    base = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    base.update(kw)
    return BertConfig(**base)


def bert_sequence_classification() -> dict[str, Any]:
    """BERT fine-tuning as the docs recommend: AdamW 5e-5, linear warmup, no decay on bias/LayerNorm."""
    from transformers import BertForSequenceClassification

    seed()
    model = BertForSequenceClassification(_bert_cfg(num_labels=3))
    opt, sched = adamw_linear_warmup(model)
    return {"model": model, "batch": text_batch(3), "optimizer": opt, "scheduler": sched}


def bert_token_classification() -> dict[str, Any]:
    """NER-style token classification; sub-word continuation labels are -100 (ignored)."""
    from transformers import BertForTokenClassification

    seed(1)
    model = BertForTokenClassification(_bert_cfg(num_labels=5))
    batch = text_batch()
    labels = torch.randint(0, 5, (BATCH, SEQ))
    labels[batch["attention_mask"] == 0] = -100
    labels[:, ::3] = -100
    batch["labels"] = labels
    opt, sched = adamw_linear_warmup(model, lr=3e-5)
    return {"model": model, "batch": batch, "optimizer": opt, "scheduler": sched}


def distilbert_sequence_classification() -> dict[str, Any]:
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    seed(2)
    cfg = DistilBertConfig(
        vocab_size=VOCAB,
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=64,
        num_labels=2,
    )
    model = DistilBertForSequenceClassification(cfg)
    opt, sched = adamw_linear_warmup(model)
    return {"model": model, "batch": text_batch(2), "optimizer": opt, "scheduler": sched}


def roberta_sequence_classification() -> dict[str, Any]:
    from transformers import RobertaConfig, RobertaForSequenceClassification

    seed(3)
    cfg = RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=80,
        num_labels=4,
        pad_token_id=1,
    )
    model = RobertaForSequenceClassification(cfg)
    batch = text_batch(4)
    batch["input_ids"][batch["attention_mask"] == 0] = 1
    opt, sched = adamw_linear_warmup(model, lr=2e-5)
    return {"model": model, "batch": batch, "optimizer": opt, "scheduler": sched}


def gpt2_language_model() -> dict[str, Any]:
    """GPT-2 pre-training style: AdamW (0.9, 0.95), wd 0.1 on matrices, cosine with warmup."""
    from transformers import GPT2Config, GPT2LMHeadModel

    seed(4)
    cfg = GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=2
    )
    model = GPT2LMHeadModel(cfg)
    opt, sched = adamw_cosine(model)
    return {"model": model, "batch": text_batch(lm=True), "optimizer": opt, "scheduler": sched}


def llama_causal_lm() -> dict[str, Any]:
    """Llama recipe: AdamW (0.9, 0.95), wd 0.1, cosine schedule with warmup, gradient clipping 1.0."""
    from transformers import LlamaConfig, LlamaForCausalLM

    seed(5)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(cfg)
    opt, sched = adamw_cosine(model, lr=3e-4)

    def step_fn(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        m.train()
        loss = m(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss.detach()

    return {"model": model, "batch": text_batch(lm=True, pad_tail=0), "optimizer": opt, "step_fn": step_fn}


def t5_conditional_generation() -> dict[str, Any]:
    """T5 fine-tuning with Adafactor at a constant 1e-3, as the T5 docs recommend."""
    from transformers import T5Config, T5ForConditionalGeneration
    from transformers.optimization import Adafactor

    seed(6)
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
    labels = torch.randint(3, VOCAB, (BATCH, 8))
    labels[:, -2:] = -100
    batch["labels"] = labels
    opt = Adafactor(
        model.parameters(), lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False
    )
    return {"model": model, "batch": batch, "optimizer": opt}


def bart_conditional_generation() -> dict[str, Any]:
    from transformers import BartConfig, BartForConditionalGeneration

    seed(7)
    cfg = BartConfig(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
    )
    model = BartForConditionalGeneration(cfg)
    batch = text_batch()
    batch["labels"] = torch.randint(3, VOCAB, (BATCH, 10))
    opt, sched = adamw_linear_warmup(model, lr=3e-5)
    return {"model": model, "batch": batch, "optimizer": opt, "scheduler": sched}


def electra_discriminator() -> dict[str, Any]:
    from transformers import ElectraConfig, ElectraForPreTraining

    seed(8)
    cfg = ElectraConfig(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    model = ElectraForPreTraining(cfg)
    batch = text_batch()
    batch["labels"] = (torch.rand(BATCH, SEQ) < 0.15).long()
    opt, sched = adamw_linear_warmup(model, lr=1e-4)
    return {"model": model, "batch": batch, "optimizer": opt, "scheduler": sched}


# ---------------------------------------------------------------------------------------- vision


def vit_image_classification() -> dict[str, Any]:
    """ViT fine-tuning: AdamW, warmup then linear decay; a zero-initialised head, as in the ViT paper."""
    from transformers import ViTConfig, ViTForImageClassification

    seed(9)
    cfg = ViTConfig(
        image_size=IMAGE,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=5,
    )
    model = ViTForImageClassification(cfg)
    nn.init.zeros_(model.classifier.weight)
    nn.init.zeros_(model.classifier.bias)
    opt, sched = adamw_linear_warmup(model, lr=3e-4)
    return {"model": model, "batch": image_batch(5), "optimizer": opt, "scheduler": sched}


def convnext_image_classification() -> dict[str, Any]:
    """ConvNeXt recipe: AdamW 4e-3 scaled down for the batch, wd 0.05, warmup then cosine."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    seed(10)
    cfg = ConvNextConfig(
        num_channels=3, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=5, patch_size=4
    )
    model = ConvNextForImageClassification(cfg)
    opt, sched = adamw_cosine(model, lr=1e-3, betas=(0.9, 0.999), wd=0.05)
    return {"model": model, "batch": image_batch(5), "optimizer": opt, "scheduler": sched}


def resnet_sgd_momentum() -> dict[str, Any]:
    """ResNet recipe: SGD lr 0.1 (batch 256, scaled linearly), momentum 0.9, wd 1e-4, cosine."""
    from transformers import ResNetConfig, ResNetForImageClassification

    seed(11)
    cfg = ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=5
    )
    model = ResNetForImageClassification(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * BATCH / 256, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    return {"model": model, "batch": image_batch(5), "optimizer": opt, "scheduler": sched}


def resnet_bottleneck_adamw() -> dict[str, Any]:
    from transformers import ResNetConfig, ResNetForImageClassification

    seed(12)
    cfg = ResNetConfig(
        embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1], layer_type="bottleneck", num_labels=10
    )
    model = ResNetForImageClassification(cfg)
    opt = torch.optim.AdamW(no_decay_groups(model, 0.05), lr=1e-3)
    return {"model": model, "batch": image_batch(10), "optimizer": opt}


def swin_image_classification() -> dict[str, Any]:
    """Swin recipe: AdamW 1e-3 (batch 1024, scaled), wd 0.05, warmup then cosine."""
    from transformers import SwinConfig, SwinForImageClassification

    seed(13)
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
    opt, sched = adamw_cosine(model, lr=5e-4, betas=(0.9, 0.999), wd=0.05)
    return {"model": model, "batch": image_batch(5), "optimizer": opt, "scheduler": sched}


def mobilenet_v2() -> dict[str, Any]:
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    seed(15)
    cfg = MobileNetV2Config(image_size=IMAGE, depth_multiplier=0.35, num_labels=5)
    model = MobileNetV2ForImageClassification(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=0.045 * BATCH / 96, momentum=0.9, weight_decay=4e-5)
    return {"model": model, "batch": image_batch(5), "optimizer": opt}


def deit_image_classification() -> dict[str, Any]:
    from transformers import DeiTConfig, DeiTForImageClassification

    seed(16)
    cfg = DeiTConfig(
        image_size=IMAGE,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=5,
    )
    model = DeiTForImageClassification(cfg)
    opt, sched = adamw_cosine(model, lr=5e-4 * BATCH / 512, betas=(0.9, 0.999), wd=0.05)
    return {"model": model, "batch": image_batch(5), "optimizer": opt, "scheduler": sched}


# ---------------------------------------------------------------------------- standard training


def mlp_mnist_style() -> dict[str, Any]:
    """An MLP on flattened 28x28 digits with SGD and momentum, the classic tutorial loop."""
    seed(17)
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
    )
    x = ((torch.rand(32, 1, 28, 28) - 0.1307) / 0.3081).clamp(-0.5, 3)
    batch = (x, torch.randint(0, 10, (32,)))
    return {
        "model": model,
        "batch": batch,
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
    }


class SmallCNN(nn.Module):
    """The PyTorch CIFAR-10 tutorial network with BatchNorm."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def cnn_cifar_style() -> dict[str, Any]:
    seed(18)
    model = SmallCNN()
    opt = torch.optim.SGD(
        model.parameters(), lr=0.1 * 16 / 128, momentum=0.9, weight_decay=5e-4, nesterov=True
    )
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    batch = (torch.randn(16, 3, IMAGE, IMAGE), torch.randint(0, 10, (16,)))
    return {
        "model": model,
        "batch": batch,
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1], label_smoothing=0.1),
        "optimizer": opt,
        "scheduler": sched,
    }


class LSTMTagger(nn.Module):
    def __init__(self, vocab: int = VOCAB, d: int = 32, tags: int = 6) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True, bidirectional=True, dropout=0.1)
        self.out = nn.Linear(2 * d, tags)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.emb(ids))
        return self.out(h)


def lstm_sequence_tagger() -> dict[str, Any]:
    """A BiLSTM tagger with Adam and gradient clipping in the user's own step."""
    seed(19)
    model = LSTMTagger()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids = torch.randint(1, VOCAB, (BATCH, SEQ))
    tags = torch.randint(0, 6, (BATCH, SEQ))

    def step_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        opt.zero_grad()
        loss = F.cross_entropy(m(x).reshape(-1, 6), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 5.0)
        opt.step()
        return loss.detach()

    return {
        "model": model,
        "batches": [(ids, tags), (ids.flip(0), tags.flip(0))],
        "optimizer": opt,
        "step_fn": step_fn,
    }


class GRUForecaster(nn.Module):
    def __init__(self, features: int = 4, d: int = 32) -> None:
        super().__init__()
        self.gru = nn.GRU(features, d, batch_first=True)
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(x)
        return self.head(h[:, -1]).squeeze(-1)


def gru_regression() -> dict[str, Any]:
    seed(20)
    model = GRUForecaster()
    x = torch.randn(32, 12, 4)
    y = x[:, -3:, 0].mean(1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=3e-3),
    }


def gpt2_grad_accumulation() -> dict[str, Any]:
    """GPT-2 with gradient accumulation over 4 micro-batches, loss divided by 4 (nanoGPT's loop)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    seed(21)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=2
        )
    )
    opt, sched = adamw_cosine(model)
    accum = 4

    def step_fn(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        total = torch.zeros(())
        for i in range(accum):
            micro = {k: v[i * (BATCH // accum) : (i + 1) * (BATCH // accum)] for k, v in batch.items()}
            loss = m(**micro).loss / accum
            loss.backward()
            total += loss.detach()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return total

    return {"model": model, "batch": text_batch(lm=True, pad_tail=0), "optimizer": opt, "step_fn": step_fn}


def bert_eval_fn() -> dict[str, Any]:
    """BERT with the user's evaluation step (model.eval() under no_grad), then back to training."""
    from transformers import BertForSequenceClassification

    seed(22)
    model = BertForSequenceClassification(_bert_cfg(num_labels=2, hidden_dropout_prob=0.2))
    opt, sched = adamw_linear_warmup(model)

    def eval_fn(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        m.eval()
        with torch.no_grad():
            out = m(**batch)
        m.train()
        return out.loss

    return {"model": model, "batch": text_batch(2), "optimizer": opt, "scheduler": sched, "eval_fn": eval_fn}


# ------------------------------------------------------------------ zero-initialised factors that move


class TinyTransformer(nn.Module):
    """Pre-norm blocks of attention (`attn.proj_qkv`, `attn.proj_out`) and MLP (`mlp.fc1`, `mlp.fc2`), with
    an optional ReZero gain per branch; used with the zero-initialisation schemes of the literature."""

    def __init__(self, d: int = 32, depth: int = 3, heads: int = 4, rezero: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            block = nn.Module()
            if not rezero:  # ReZero drops the layer norms
                block.norm1, block.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            block.attn = nn.Module()
            block.attn.proj_qkv, block.attn.proj_out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            block.mlp = nn.Module()
            block.mlp.fc1, block.mlp.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            if rezero:
                block.alpha = nn.Parameter(torch.zeros(()))
            self.blocks.append(block)
        self.heads = heads
        self.rezero = rezero
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 4)

    def _attn(self, a: nn.Module, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = a.proj_qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return a.proj_out(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        for blk in self.blocks:
            gain = blk.alpha if self.rezero else 1.0
            x = x + gain * self._attn(blk.attn, blk.norm1(x) if not self.rezero else x)
            x = x + gain * blk.mlp.fc2(F.gelu(blk.mlp.fc1(blk.norm2(x) if not self.rezero else x)))
        return self.head(self.norm(x).mean(1))


def zero_init(model: nn.Module, patterns: tuple[str, ...]) -> None:
    """Weights and biases of the Linear layers whose name contains a pattern start at zero."""
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear) and any(p in name for p in patterns):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)


def _transformer_setup(model: nn.Module) -> dict[str, Any]:
    batch = (torch.randint(0, VOCAB, (BATCH, 16)), torch.randint(0, 4, (BATCH,)))
    return {
        "model": model,
        "batch": batch,
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-3),
    }


def zero_residual_projections() -> dict[str, Any]:
    """Each residual branch's output projection (attn.proj_out, mlp.fc2) and the head start at zero
    (GPT-2/Fixup/DiT style): every block starts as the identity and moves after its first update."""
    seed(23)
    model = TinyTransformer()
    zero_init(model, ("attn.proj_out", "mlp.fc2", "head"))
    return _transformer_setup(model)


def rezero_transformer() -> dict[str, Any]:
    """ReZero (Bachlechner et al.): every residual branch scaled by a gain that starts at exactly 0."""
    seed(24)
    return _transformer_setup(TinyTransformer(rezero=True))


class BasicBlock(nn.Module):
    def __init__(self, c: int, zero_init_residual: bool) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        if zero_init_residual:
            nn.init.zeros_(self.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


def resnet_zero_init_residual() -> dict[str, Any]:
    """torchvision's zero_init_residual (Goyal et al.): the last batch-norm gain of every residual block
    starts at 0, so each block starts as the identity; SGD with momentum."""
    seed(25)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        BasicBlock(16, True),
        BasicBlock(16, True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )
    batch = (torch.randn(BATCH, 3, IMAGE, IMAGE), torch.randint(0, 10, (BATCH,)))
    return {
        "model": model,
        "batch": batch,
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(
            model.parameters(), lr=0.1 * BATCH / 256, momentum=0.9, weight_decay=1e-4
        ),
    }


HEALTHY = [
    bert_sequence_classification,
    bert_token_classification,
    distilbert_sequence_classification,
    roberta_sequence_classification,
    gpt2_language_model,
    llama_causal_lm,
    t5_conditional_generation,
    bart_conditional_generation,
    electra_discriminator,
    vit_image_classification,
    convnext_image_classification,
    resnet_sgd_momentum,
    resnet_bottleneck_adamw,
    swin_image_classification,
    mobilenet_v2,
    deit_image_classification,
    mlp_mnist_style,
    cnn_cifar_style,
    lstm_sequence_tagger,
    gru_regression,
    gpt2_grad_accumulation,
    bert_eval_fn,
    zero_residual_projections,
    rezero_transformer,
    resnet_zero_init_residual,
]
