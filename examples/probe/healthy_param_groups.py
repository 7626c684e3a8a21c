"""Healthy controls for the per-parameter `params_not_updated` comparison (none may warn).

- `decay_groups`: AdamW with a weight-decay group and a no-decay group (norms and biases), every
  parameter in one of them;
- `sparse_embedding`: an embedding most of whose rows are unused by the batch (their gradient is
  exactly zero) next to a frozen (`requires_grad=False`) positional table;
- `warmup_tiny_lr`: Adam whose LambdaLR warmup starts the lr at 1e-6 of its peak (tiny, not zero);
- `sgd_momentum`: SGD with momentum and a LayerNorm (probe it with steps=1 too);
- `step_fn_sched`: a user `step_fn` with gradient clipping and a per-step scheduler.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab: int = 500, d: int = 16, n_classes: int = 4, max_len: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.1, requires_grad=False)
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        h = self.norm(h + torch.tanh(self.fc(h)))
        return self.head(h.mean(1))


def _batch() -> tuple:
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 40, (16, 8), generator=g)  # rows 40..499 are never used
    return tokens, torch.randint(0, 4, (16,), generator=g)


def _loss(m: nn.Module, b: tuple) -> torch.Tensor:
    return F.cross_entropy(m(b[0]), b[1])


def _groups(model: nn.Module) -> list:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and p.requires_grad]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2 and p.requires_grad]
    return [{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}]


def decay_groups() -> dict:
    torch.manual_seed(0)
    model = Tagger()
    opt = torch.optim.AdamW(_groups(model), lr=1e-2)
    return {"model": model, "batch": _batch(), "loss_fn": _loss, "optimizer": opt}


def sparse_embedding() -> dict:
    torch.manual_seed(0)
    model = Tagger()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    return {"model": model, "batch": _batch(), "loss_fn": _loss, "optimizer": opt}


def warmup_tiny_lr() -> dict:
    torch.manual_seed(0)
    model = Tagger()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(1e-6, s / 100))
    batch = _batch()

    def step_fn(m: nn.Module, b: tuple) -> torch.Tensor:
        opt.zero_grad()
        loss = _loss(m, b)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    return {"model": model, "batch": batch, "step_fn": step_fn, "optimizer": opt}


def sgd_momentum() -> dict:
    torch.manual_seed(0)
    model = Tagger()
    opt = torch.optim.SGD(_groups(model), lr=0.1, momentum=0.9)
    return {"model": model, "batch": _batch(), "loss_fn": _loss, "optimizer": opt}


def step_fn_sched() -> dict:
    torch.manual_seed(0)
    model = Tagger()
    opt = torch.optim.AdamW(_groups(model), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=100)

    def step_fn(m: nn.Module, b: tuple) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = _loss(m, b)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        sched.step()
        return loss

    return {"model": model, "batch": _batch(), "step_fn": step_fn, "optimizer": opt}
