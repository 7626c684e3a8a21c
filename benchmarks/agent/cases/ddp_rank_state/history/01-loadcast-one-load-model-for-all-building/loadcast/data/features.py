"""Feature matrix of a site: weather, calendar encodings and building size."""

from __future__ import annotations

import math

import torch

from loadcast.data.sites import SiteData

FEATURES = (
    "temperature",
    "temperature_lag24",
    "humidity",
    "hour_sin",
    "hour_cos",
    "weekday_sin",
    "weekday_cos",
    "is_weekend",
    "log_area",
    "cooling_degree",
    "heating_degree",
)


def site_features(site: SiteData, balance_heat: float = 15.0, balance_cool: float = 21.0) -> torch.Tensor:
    """``(H - 24, len(FEATURES))``: the first day is dropped for the 24 h temperature lag."""
    t = site.temperature
    hour = site.hour.float()
    weekday = site.weekday.float()
    cols = [
        t[24:],
        t[:-24],
        site.humidity[24:],
        torch.sin(2 * math.pi * hour / 24)[24:],
        torch.cos(2 * math.pi * hour / 24)[24:],
        torch.sin(2 * math.pi * weekday / 7)[24:],
        torch.cos(2 * math.pi * weekday / 7)[24:],
        (weekday >= 5).float()[24:],
        torch.full((len(t) - 24,), math.log(site.area)),
        torch.relu(t - balance_cool)[24:],
        torch.relu(balance_heat - t)[24:],
    ]
    return torch.stack(cols, dim=1).float()


def site_target(site: SiteData) -> torch.Tensor:
    return site.load[24:].float()
