"""A Hugging Face Trainer with its own compute_loss: a tiny BERT regressor, no downloads.

python hf_regression_train.py --output_dir out [--squeeze]
The bug (without --squeeze): logits of shape (B, 1) against labels of shape (B,) in mse_loss.
"""

import argparse

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Scores(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(3, vocab, (n, seq), generator=g)
        self.labels = (self.ids.float().mean(1) / vocab).clone()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.labels[i]}


class RegressionTrainer(Trainer):
    squeeze = False

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits.squeeze(-1) if self.squeeze else outputs.logits
        loss = torch.nn.functional.mse_loss(logits, labels)
        return (loss, outputs) if return_outputs else loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--squeeze", action="store_true")
    ap.add_argument("--accum", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, num_labels=1
    )
    model = BertForSequenceClassification(config)
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        learning_rate=5e-4,
        num_train_epochs=2,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=args.accum,
        warmup_steps=2,
        logging_steps=5,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
    )
    RegressionTrainer.squeeze = args.squeeze
    trainer = RegressionTrainer(model=model, args=training_args, train_dataset=Scores(128, 16, 128))
    trainer.train()


if __name__ == "__main__":
    main()
