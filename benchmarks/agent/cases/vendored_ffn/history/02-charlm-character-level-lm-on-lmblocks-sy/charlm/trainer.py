"""Training loop: AdamW with cosine schedule, gradient accumulation, periodic evaluation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from lmblocks import TransformerLM, build_optimizer, cosine_with_warmup, save_pretrained

from charlm.config import RunConfig, to_dict
from charlm.data import DataBundle
from charlm.evaluate import eval_loss
from charlm.logging_utils import CSVLogger


@dataclass
class TrainResult:
    step: int
    train_loss: float
    val_loss: float


def train(cfg: RunConfig, model: TransformerLM, data: DataBundle, quiet: bool = False) -> TrainResult:
    def say(message: str) -> None:
        if not quiet:
            print(message, flush=True)

    gen = torch.Generator().manual_seed(cfg.seed)
    optimizer = build_optimizer(model, cfg.optim.lr, cfg.optim.weight_decay, cfg.optim.betas)
    scheduler = cosine_with_warmup(optimizer, cfg.optim.warmup, cfg.steps, cfg.optim.min_lr_ratio)
    csv_log = CSVLogger(Path(cfg.out_dir) / "log.csv" if cfg.out_dir else None)
    model.train()
    smoothed = None
    val = float("nan")
    for step in range(1, cfg.steps + 1):
        x, y = data.train.batch(cfg.batch_size, gen)
        loss = model(x, labels=y).loss
        loss.backward()
        step_loss = loss.item()
        if cfg.optim.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        smoothed = step_loss if smoothed is None else 0.9 * smoothed + 0.1 * step_loss

        if step % cfg.log_every == 0:
            csv_log.log({"step": step, "loss": round(smoothed, 4), "lr": scheduler.get_last_lr()[0]})
        if step % cfg.eval_every == 0 or step == cfg.steps:
            val = eval_loss(model, data.val, cfg.batch_size, cfg.eval_batches)
            say(f"step {step:5d}  train_loss {smoothed:.4f}  val_loss {val:.4f}  lr {scheduler.get_last_lr()[0]:.2e}")
    csv_log.close()
    if cfg.out_dir:
        out = Path(cfg.out_dir)
        save_pretrained(model, out / "model")
        data.tokenizer.save(out / "model" / "tokenizer.json")
        (out / "run_config.json").write_text(json.dumps(to_dict(cfg), indent=2))
    assert smoothed is not None
    return TrainResult(cfg.steps, smoothed, val)
