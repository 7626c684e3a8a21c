"""A Lightning module and Trainer on CPU. python lightning_train.py [--encoder-only-optimizer]

The bug (--encoder-only-optimizer): configure_optimizers hands the optimizer the encoder's
parameters only, so the classifier head is in no optimizer and never moves.
"""

import argparse

import lightning as L
import torch
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self, encoder_only):
        super().__init__()
        self.encoder_only = encoder_only
        self.encoder = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        return self.head(self.encoder(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        params = self.encoder.parameters() if self.encoder_only else self.parameters()
        return torch.optim.Adam(params, lr=1e-3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder-only-optimizer", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
    trainer = L.Trainer(
        max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Classifier(args.encoder_only_optimizer), loader)


if __name__ == "__main__":
    main()
