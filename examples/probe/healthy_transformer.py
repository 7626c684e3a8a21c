"""Healthy control: a small causal transformer LM with token and position embeddings and dropout."""

import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 100, d: int = 32, layers: int = 2, ctx: int = 16) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.drop(self.tok(ids) + self.pos(torch.arange(t)))
        return self.head(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def _loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def make() -> dict:
    torch.manual_seed(0)
    model = TinyLM()
    batches = [torch.randint(0, 100, (8, 17)) for _ in range(2)]
    return {
        "model": model,
        "batches": batches,
        "loss_fn": _loss,
        "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-3),
    }
