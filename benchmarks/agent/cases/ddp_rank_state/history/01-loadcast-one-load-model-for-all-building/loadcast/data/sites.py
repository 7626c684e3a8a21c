"""Site recordings: hourly electricity load of a building with its weather and calendar.

``SiteStore`` stands in for the bucket of per-site files (one file per building, a year of hours
each). ``read(site_id)`` is deterministic, so every process that reads a site gets the same data.
Buildings differ a lot in size (floor area spans two orders of magnitude), in base load and in how
strongly they heat and cool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

HOURS_PER_YEAR = 24 * 364


@dataclass
class SiteData:
    site_id: int
    temperature: torch.Tensor  # (H,) deg C
    humidity: torch.Tensor  # (H,) 0..1
    hour: torch.Tensor  # (H,) 0..23
    weekday: torch.Tensor  # (H,) 0..6
    area: float  # floor area, 1000 m^2
    load: torch.Tensor  # (H,) kWh

    def __len__(self) -> int:
        return len(self.load)


class SiteStore:
    def __init__(self, n_sites: int = 16, hours: int = HOURS_PER_YEAR, seed: int = 0) -> None:
        self.n_sites = n_sites
        self.hours = hours
        self.seed = seed

    def site_ids(self) -> list[int]:
        return list(range(self.n_sites))

    def read(self, site_id: int) -> SiteData:
        if not 0 <= site_id < self.n_sites:
            raise KeyError(f"no site {site_id} (0..{self.n_sites - 1})")
        gen = torch.Generator().manual_seed(self.seed * 1000 + site_id)
        h = torch.arange(self.hours)
        hour, day = h % 24, h // 24
        weekday = day % 7
        climate = 8 + 10 * torch.rand((), generator=gen)  # mean temperature of the site's city
        season = -10 * torch.cos(2 * math.pi * day / 364)
        daily = 4 * torch.sin(2 * math.pi * (hour - 9) / 24)
        weather = torch.cumsum(torch.randn(self.hours, generator=gen) * 0.3, 0)
        weather = weather - torch.linspace(0, float(weather[-1]), self.hours)  # no drift over the year
        temperature = climate + season + daily + weather
        humidity = (0.6 - 0.01 * (temperature - climate) + 0.05 * torch.randn(self.hours, generator=gen)).clamp(0.1, 1.0)
        area = float(torch.exp(torch.empty(()).uniform_(math.log(0.5), math.log(40.0), generator=gen)))
        heating = 0.3 + 0.5 * torch.rand((), generator=gen)
        cooling = 0.2 + 0.6 * torch.rand((), generator=gen)
        occupied = ((hour >= 7) & (hour < 19) & (weekday < 5)).float()
        per_area = (
            2.0
            + 3.0 * occupied
            + heating * torch.relu(15 - temperature) * 0.4
            + cooling * torch.relu(temperature - 21) * 0.6
        )
        load = area * per_area * (1 + 0.05 * torch.randn(self.hours, generator=gen))
        return SiteData(site_id, temperature, humidity, hour, weekday, area, load)
