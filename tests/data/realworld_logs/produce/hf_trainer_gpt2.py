"""Train a tiny GPT-2 (built from a config, no downloads) with the Hugging Face Trainer on CPU.

Used to produce real Trainer stdout (tqdm bars, the logged dicts), a real trainer_state.json and a
real TensorBoard event file. The text is the license texts Debian ships in /usr/share/common-licenses,
read as characters. Run it in a scratch venv with transformers, torch and tensorboard installed:

    python hf_trainer_gpt2.py --out OUT [--lr 1e-3] [--max-steps 300] [--max-grad-norm 1.0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

BLOCK = 64


class CharBlocks(torch.utils.data.Dataset):
    def __init__(self, ids: torch.Tensor) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return (len(self.ids) - 1) // BLOCK

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        chunk = self.ids[i * BLOCK : (i + 1) * BLOCK]
        return {"input_ids": chunk, "labels": chunk.clone()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-steps", type=int, default=300)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    text = "".join(
        f.read_text(errors="replace")
        for f in sorted(Path("/usr/share/common-licenses").iterdir())
        if f.is_file()
    )
    vocab = sorted(set(text))
    ids = torch.tensor([vocab.index(c) for c in text], dtype=torch.long)
    split = int(len(ids) * 0.9)
    cfg = GPT2Config(vocab_size=len(vocab), n_positions=BLOCK, n_embd=64, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(cfg)
    args = TrainingArguments(
        output_dir=a.out,
        max_steps=a.max_steps,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        learning_rate=a.lr,
        max_grad_norm=a.max_grad_norm,
        logging_steps=10,
        eval_strategy="steps",
        eval_steps=50,
        save_strategy="steps",
        save_steps=a.max_steps,
        report_to=["tensorboard"],
        use_cpu=True,
        seed=a.seed,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model, args=args, train_dataset=CharBlocks(ids[:split]), eval_dataset=CharBlocks(ids[split:])
    )
    trainer.train()


if __name__ == "__main__":
    main()
