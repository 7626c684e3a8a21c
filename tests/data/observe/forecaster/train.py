"""Train the forecaster: python train.py --config configs/base.json"""

import argparse
import json

import torch

from forecast.data import Windows
from forecast.init import apply_zero_init
from forecast.model import Forecaster


class Trainer:
    def __init__(self, cfg):
        torch.manual_seed(cfg.get("seed", 0))
        self.cfg = cfg
        m = cfg["model"]
        self.model = Forecaster(m["patch"], cfg["history"] // m["patch"], cfg["horizon"], m["dim"], m["depth"], m["heads"])
        apply_zero_init(self.model, cfg.get("zero_init", []))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg["lr"], weight_decay=0.01)
        data = Windows(cfg["samples"], cfg["history"], cfg["horizon"])
        self.loader = torch.utils.data.DataLoader(data, batch_size=cfg["batch_size"], shuffle=True)

    def step(self, history, future):
        pred = self.model(history)
        loss = torch.nn.functional.mse_loss(pred, future)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    def fit(self):
        for epoch in range(self.cfg["epochs"]):
            total = 0.0
            for history, future in self.loader:
                total += self.step(history, future)
            print(f"epoch {epoch} loss {total / len(self.loader):.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    cfg = json.load(open(ap.parse_args().config))
    Trainer(cfg).fit()
