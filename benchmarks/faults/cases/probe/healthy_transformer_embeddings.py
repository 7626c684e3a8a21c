"""Healthy: small pre-norm transformer LM with token and position embeddings, dropout, AdamW."""

import torch
import torch.nn.functional as F
from torch import nn


class TinyGPT(nn.Module):
    def __init__(self, vocab=96, d=48, n_layers=2, ctx=24):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        x = self.drop(self.tok(idx) + self.pos(torch.arange(t)))
        return self.lm_head(self.ln_f(self.blocks(x, mask=mask, is_causal=True)))


def setup():
    torch.manual_seed(0)
    model = TinyGPT()
    tokens = torch.randint(0, 96, (8, 25))
    return {
        "model": model,
        "batch": tokens,
        "loss_fn": lambda m, t: F.cross_entropy(m(t[:, :-1]).reshape(-1, 96), t[:, 1:].reshape(-1)),
        "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1),
    }
