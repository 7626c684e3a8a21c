"""Healthy: an HF-style model taking a dict batch (input_ids, attention_mask, labels) and returning an
output object with `.loss`; no loss_fn, AdamW.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor
    logits: torch.Tensor


class TinyBertForSequenceClassification(nn.Module):
    def __init__(self, vocab=300, d=32, n_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, d, padding_idx=0)
        self.layer_norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1, batch_first=True, activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.classifier = nn.Linear(d, n_labels)

    def forward(self, input_ids, attention_mask, labels=None):
        h = self.encoder(
            self.layer_norm(self.embeddings(input_ids)), src_key_padding_mask=attention_mask == 0
        )
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (h * mask).sum(1) / mask.sum(1)
        logits = self.classifier(pooled)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def setup():
    torch.manual_seed(0)
    model = TinyBertForSequenceClassification()
    input_ids = torch.randint(1, 300, (16, 14))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[:8, 10:] = 0
    input_ids[attention_mask == 0] = 0
    labels = torch.randint(0, 2, (16,))
    return {
        "model": model,
        "batch": {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels},
        "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-3),
    }
