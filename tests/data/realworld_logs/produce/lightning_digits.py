"""Train a small MLP on scikit-learn's bundled digits with PyTorch Lightning on CPU.

Writes a real CSVLogger metrics.csv and a real MLflow file store (MLFlowLogger), and prints the
Lightning progress bar. `--fail-at-step N` makes the training step request an impossible CPU allocation
at global step N, so the run dies with torch's real allocator error and traceback.

    python lightning_digits.py --out OUT [--epochs 30] [--fail-at-step N]
"""

from __future__ import annotations

import argparse

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger, MLFlowLogger
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(L.LightningModule):
    def __init__(self, lr: float, fail_at_step: int | None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        if self.hparams.fail_at_step is not None and self.global_step == self.hparams.fail_at_step:
            torch.empty(1 << 50, dtype=torch.float32)  # asks for 4 PiB: the allocator refuses
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--fail-at-step", type=int, default=None)
    a = p.parse_args()
    L.seed_everything(0)
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y)
    train = TensorDataset(x[:1500], y[:1500])
    val = TensorDataset(x[1500:], y[1500:])
    loggers = [
        CSVLogger(a.out, name="csv"),
        MLFlowLogger(experiment_name="digits", tracking_uri=f"file:{a.out}/mlruns"),
    ]
    trainer = L.Trainer(max_epochs=a.epochs, logger=loggers, log_every_n_steps=5, accelerator="cpu")
    trainer.fit(
        Net(a.lr, a.fail_at_step),
        DataLoader(train, batch_size=32, shuffle=True),
        DataLoader(val, batch_size=128),
    )


if __name__ == "__main__":
    main()
