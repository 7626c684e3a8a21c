"""Healthy control: an HF-style model without loss_fn.

The batch is a dict, `forward(**batch)` takes input_ids, attention_mask and labels, and returns an
output object with `.loss` and `.logits` (like transformers' ModelOutput).
"""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor


class TinyForSequenceClassification(nn.Module):
    def __init__(self, vocab: int = 64, d: int = 32, labels: int = 3) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(vocab, d, padding_idx=0)
        self.encoder = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(d, labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> Output:
        h = self.encoder(self.embeddings(input_ids))
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1.0)
        logits = self.classifier(self.dropout(pooled))
        return Output(loss=nn.functional.cross_entropy(logits, labels), logits=logits)


def make() -> dict:
    torch.manual_seed(0)
    model = TinyForSequenceClassification()
    ids = torch.randint(1, 64, (16, 10))
    ids[:, 7:] = 0
    mask = (ids != 0).long()
    batch = {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 3, (16,))}
    return {"model": model, "batch": batch, "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-3)}
