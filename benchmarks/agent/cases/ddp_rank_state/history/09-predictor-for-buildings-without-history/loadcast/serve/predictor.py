"""Inference for buildings with or without metering history: load a checkpoint, build features
from a weather forecast and a calendar, return kWh per hour."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from loadcast.data.features import FEATURES, site_features
from loadcast.data.sites import SiteData
from loadcast.models import LoadModel
from loadcast.train import checkpoint


@dataclass
class Forecast:
    hours: torch.Tensor  # hour index of each prediction
    kwh: torch.Tensor


class Predictor:
    def __init__(self, model: LoadModel) -> None:
        self.model = model.eval()

    @classmethod
    def from_checkpoint(cls, path: str | Path, width: int = 64, depth: int = 3) -> "Predictor":
        model = LoadModel(len(FEATURES), width, depth)
        checkpoint.load(path, model)
        if not bool(model.scaler.fitted):
            raise ValueError(f"{path}: the checkpoint's scaler was never fitted")
        return cls(model)

    @torch.no_grad()
    def predict(self, weather: SiteData) -> Forecast:
        """``weather`` carries temperature, humidity, calendar and floor area (``load`` is ignored);
        the first 24 hours only feed the temperature lag."""
        x = site_features(weather)
        return Forecast(hours=torch.arange(24, len(weather.temperature)), kwh=self.model(x))

    @torch.no_grad()
    def daily_peak(self, weather: SiteData) -> list[tuple[int, float]]:
        """(hour of day, kWh) of the peak of each full day of the forecast."""
        forecast = self.predict(weather)
        days = len(forecast.kwh) // 24
        out = []
        for d in range(days):
            day = forecast.kwh[d * 24 : (d + 1) * 24]
            h = int(day.argmax())
            out.append((h, float(day[h])))
        return out
