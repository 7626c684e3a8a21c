"""Train a tiny character-level GPT for real and write the run folders `compare_runs` is tested on.

    .venv/bin/python tests/data/compare/make_runs.py [OUT_DIR]   # default: tests/data/compare/runs

Every run trains the same model on the same generated corpus; only what each run says differs:
- base_s0, base_s1, base_s2: healthy runs with seeds 0, 1, 2 (metrics.jsonl every step, config.yaml);
- base_s0_csv5: the same training as base_s0, logged every 5th step to metrics.csv (config.json);
- lr_const: seed 0, but the schedule has no warmup and no decay (constant lr 8e-3);
- lr_const_csv5: that run logged every 5th step to metrics.csv;
- resume_noopt: seed 0, interrupted at step 150 after a checkpoint at step 120, resumed from the
  checkpoint in a fresh process that restores model, scheduler, RNG and data position but not the
  optimizer state; both processes append to one console log (train.log), so steps 121-150 appear twice.

CPU only, deterministic for a given torch build (the committed logs came from torch 2.13.0+cpu).
"""

from __future__ import annotations

import csv
import json
import math
import random
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

STEPS = 300
BATCH = 16
BLOCK = 32
WARMUP = 20
PEAK_LR = 3e-3
MIN_LR = 3e-4
VAL_EVERY = 25


def corpus() -> str:
    """A small generated corpus (fixed seed, independent of the training seed)."""
    rng = random.Random(1234)
    subjects = ["the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher", "our team"]
    verbs = ["sees", "likes", "finds", "follows", "helps", "watches", "calls"]
    objects = ["the ball", "a red apple", "the river", "a quiet house", "the new book", "a green hill"]
    tails = ["today", "at night", "in the morning", "again", "with care", "near the road"]
    lines = []
    for _ in range(3000):
        lines.append(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(tails)}.")
    return " ".join(lines)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(
        self, vocab: int, dim: int = 48, layers: int = 2, heads: int = 4, dropout: float = 0.1
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(BLOCK, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1])
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


def lr_at(step: int, schedule: str) -> float:
    if schedule == "constant":
        return 8e-3
    if step <= WARMUP:
        return PEAK_LR * step / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    return MIN_LR + 0.5 * (PEAK_LR - MIN_LR) * (1 + math.cos(math.pi * progress))


class Trainer:
    def __init__(self, seed: int, schedule: str) -> None:
        torch.manual_seed(seed)
        text = corpus()
        chars = sorted(set(text))
        self.data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
        split = int(0.9 * len(self.data))
        self.train, self.val = self.data[:split], self.data[split:]
        self.model = TinyGPT(len(chars))
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=PEAK_LR, betas=(0.9, 0.99), weight_decay=0.01
        )
        self.schedule = schedule
        self.gen = torch.Generator().manual_seed(seed + 100)  # the data order
        self.step = 0

    def batch(self, source: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(source) - BLOCK - 1, (BATCH,), generator=gen)
        x = torch.stack([source[i : i + BLOCK] for i in ix])
        y = torch.stack([source[i + 1 : i + BLOCK + 1] for i in ix])
        return x, y

    def train_step(self) -> dict[str, float]:
        self.step += 1
        lr = lr_at(self.step, self.schedule)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.model.train()
        x, y = self.batch(self.train, self.gen)
        logits = self.model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return {"loss": loss.item(), "lr": lr, "grad_norm": norm.item()}

    @torch.no_grad()
    def val_loss(self) -> float:
        self.model.eval()
        gen = torch.Generator().manual_seed(99)
        losses = []
        for _ in range(4):
            x, y = self.batch(self.val, gen)
            logits = self.model(x)
            losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
        return sum(losses) / len(losses)

    def checkpoint(self, with_optimizer: bool) -> dict:
        state = {
            "model": self.model.state_dict(),
            "step": self.step,
            "rng": torch.get_rng_state(),
            "data_rng": self.gen.get_state(),
        }
        if with_optimizer:
            state["optimizer"] = self.opt.state_dict()
        return state

    def restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.step = state["step"]
        torch.set_rng_state(state["rng"])
        self.gen.set_state(state["data_rng"])
        if "optimizer" in state:
            self.opt.load_state_dict(state["optimizer"])


def config(seed: int, schedule: str, **extra: object) -> dict:
    cfg: dict = {
        "model": {
            "type": "tiny-gpt",
            "dim": 48,
            "layers": 2,
            "heads": 4,
            "dropout": 0.1,
            "block_size": BLOCK,
        },
        "optimizer": {"name": "adamw", "lr": PEAK_LR, "betas": [0.9, 0.99], "weight_decay": 0.01},
        "lr_schedule": "warmup_cosine" if schedule == "warmup_cosine" else "constant",
        "warmup_steps": WARMUP if schedule == "warmup_cosine" else 0,
        "max_grad_norm": 1.0,
        "batch_size": BATCH,
        "max_steps": STEPS,
        "seed": seed,
        "output_dir": f"runs/{extra.pop('name', 'run')}",
    }
    if schedule == "constant":
        cfg["optimizer"]["lr"] = 8e-3
    cfg.update(extra)
    return cfg


def write_yaml(path: Path, data: dict, indent: int = 0) -> None:
    lines: list[str] = []

    def emit(obj: dict, depth: int) -> None:
        for key, value in obj.items():
            pad = "  " * depth
            if isinstance(value, dict):
                lines.append(f"{pad}{key}:")
                emit(value, depth + 1)
            else:
                lines.append(f"{pad}{key}: {json.dumps(value)}")

    emit(data, indent)
    path.write_text("\n".join(lines) + "\n")


def run(seed: int, schedule: str, jsonl: Path | None, csv_path: Path | None) -> None:
    t = Trainer(seed, schedule)
    jf = jsonl.open("w") if jsonl else None
    cf = csv_path.open("w", newline="") if csv_path else None
    writer = csv.writer(cf) if cf else None
    if writer:
        writer.writerow(["step", "train/loss", "train/lr", "train/grad_norm", "val/loss"])
    while t.step < STEPS:
        rec = t.train_step()
        val = t.val_loss() if t.step % VAL_EVERY == 0 else None
        if jf:
            row = {"step": t.step, **rec}
            if val is not None:
                row["val_loss"] = val
            jf.write(json.dumps(row) + "\n")
        if writer and t.step % 5 == 0:
            writer.writerow(
                [
                    t.step,
                    f"{rec['loss']:.6f}",
                    f"{rec['lr']:.6e}",
                    f"{rec['grad_norm']:.6f}",
                    "" if val is None else f"{val:.6f}",
                ]
            )
    for fh in (jf, cf):
        if fh:
            fh.close()


def console_line(step: int, rec: dict[str, float], val: float | None) -> str:
    line = f"step {step}/{STEPS} | loss {rec['loss']:.4f} | lr {rec['lr']:.3e} | grad_norm {rec['grad_norm']:.4f}"
    return line + (f" | val_loss {val:.4f}" if val is not None else "")


def run_resumed(out: Path) -> None:
    """Two processes' worth of training in one log: the second resumes without optimizer state."""
    log = (out / "train.log").open("w")
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "ckpt.pt"
        t = Trainer(0, "warmup_cosine")
        log.write("starting training from scratch, seed 0\n")
        while t.step < 150:
            rec = t.train_step()
            val = t.val_loss() if t.step % VAL_EVERY == 0 else None
            log.write(console_line(t.step, rec, val) + "\n")
            if t.step == 120:
                torch.save(t.checkpoint(with_optimizer=False), ckpt)
                log.write("saved checkpoint at step 120\n")
        log.write("process killed (preempted) at step 150\n")
        del t
        t = Trainer(0, "warmup_cosine")
        t.restore(torch.load(ckpt, weights_only=False))
        log.write(f"resumed from checkpoint at step {t.step}\n")
        while t.step < STEPS:
            rec = t.train_step()
            val = t.val_loss() if t.step % VAL_EVERY == 0 else None
            log.write(console_line(t.step, rec, val) + "\n")
    log.close()


def main() -> None:
    torch.set_num_threads(1)
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "runs"
    for name, seed, schedule in [
        ("base_s0", 0, "warmup_cosine"),
        ("base_s1", 1, "warmup_cosine"),
        ("base_s2", 2, "warmup_cosine"),
        ("lr_const", 0, "constant"),
    ]:
        out = root / name
        out.mkdir(parents=True, exist_ok=True)
        write_yaml(out / "config.yaml", config(seed, schedule, name=name))
        csv_out = None
        if seed == 0:
            csv_dir = root / f"{name}_csv5"
            csv_dir.mkdir(parents=True, exist_ok=True)
            (csv_dir / "config.json").write_text(
                json.dumps(config(seed, schedule, name=f"{name}_csv5", log_every=5), indent=2) + "\n"
            )
            csv_out = csv_dir / "metrics.csv"
        run(seed, schedule, out / "metrics.jsonl", csv_out)
        print("wrote", out)
    out = root / "resume_noopt"
    out.mkdir(parents=True, exist_ok=True)
    write_yaml(
        out / "config.yaml", config(0, "warmup_cosine", name="resume_noopt", resume_from="ckpt/step120.pt")
    )
    run_resumed(out)
    print("wrote", out)


if __name__ == "__main__":
    main()
