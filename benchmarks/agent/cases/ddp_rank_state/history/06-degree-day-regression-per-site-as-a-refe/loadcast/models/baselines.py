"""Per-site degree-day regression: the classic engineering baseline for building load.

load ~ a + b * heating_degree + c * cooling_degree + d * occupied, fitted by least squares per site
on the training hours. It needs each building's own history; the learned model has to generalise
from weather, calendar and floor area alone (new buildings have no history), so the two are not
directly comparable on known sites.
"""

from __future__ import annotations

import torch

from loadcast.data.features import FEATURES


def _design(x: torch.Tensor) -> torch.Tensor:
    col = {name: i for i, name in enumerate(FEATURES)}
    hour = torch.atan2(x[:, col["hour_sin"]], x[:, col["hour_cos"]]) * 24 / (2 * torch.pi) % 24
    occupied = ((hour >= 6.5) & (hour < 18.5) & (x[:, col["is_weekend"]] < 0.5)).float()
    return torch.stack(
        [torch.ones(len(x)), x[:, col["heating_degree"]], x[:, col["cooling_degree"]], occupied], dim=1
    ).double()


class DegreeDayBaseline:
    def __init__(self) -> None:
        self.coef: dict[int, torch.Tensor] = {}

    def fit(self, x: torch.Tensor, y: torch.Tensor, site: torch.Tensor) -> "DegreeDayBaseline":
        for s in torch.unique(site).tolist():
            m = site == s
            solution = torch.linalg.lstsq(_design(x[m]), y[m].double().unsqueeze(1))
            self.coef[int(s)] = solution.solution.squeeze(1)
        return self

    def predict(self, x: torch.Tensor, site: torch.Tensor) -> torch.Tensor:
        out = torch.empty(len(x), dtype=torch.float64)
        for s in torch.unique(site).tolist():
            m = site == s
            if int(s) not in self.coef:
                raise KeyError(f"site {s} was not in the training data")
            out[m] = _design(x[m]) @ self.coef[int(s)]
        return out.float()
