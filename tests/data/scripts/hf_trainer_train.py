"""A Hugging Face Trainer script (written for the probe's scaffold tests): tiny BERT, no downloads."""

import argparse

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab, labels):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(3, vocab, (n, seq), generator=g)
        self.labels = torch.randint(0, labels, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones_like(self.ids[i]),
            "labels": self.labels[i],
        }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--learning_rate", type=float, default=5e-5)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch_size", type=int, default=8)
    args = ap.parse_args()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=3,
    )
    model = BertForSequenceClassification(config)
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        learning_rate=args.learning_rate,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        warmup_steps=2,
        weight_decay=0.01,
        logging_steps=5,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=TokenDataset(64, 16, 128, 3))
    trainer.train()


if __name__ == "__main__":
    main()
