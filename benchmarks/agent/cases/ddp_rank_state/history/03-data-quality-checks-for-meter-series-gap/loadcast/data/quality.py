"""Data quality checks on a site's meter series: gaps, flat lines, spikes, negative readings.

Real meter exports have all of these; the development store has none, so these checks mostly
guard the loader against the real bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from loadcast.data.sites import SiteData


@dataclass
class QualityReport:
    site_id: int
    n_hours: int
    missing: int = 0
    negative: int = 0
    flat_runs: list[tuple[int, int]] = field(default_factory=list)  # (start, length)
    spikes: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.negative or self.flat_runs or self.spikes)

    def summary(self) -> str:
        if self.ok:
            return f"site {self.site_id}: ok ({self.n_hours} hours)"
        parts = []
        if self.missing:
            parts.append(f"{self.missing} missing")
        if self.negative:
            parts.append(f"{self.negative} negative")
        if self.flat_runs:
            parts.append(f"{len(self.flat_runs)} flat run(s), longest {max(n for _, n in self.flat_runs)} h")
        if self.spikes:
            parts.append(f"{len(self.spikes)} spike(s)")
        return f"site {self.site_id}: " + ", ".join(parts)


def flat_runs(values: torch.Tensor, min_length: int = 6, tol: float = 1e-6) -> list[tuple[int, int]]:
    """Runs of at least ``min_length`` identical readings (a stuck meter)."""
    runs = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or abs(float(values[i]) - float(values[start])) > tol:
            if i - start >= min_length:
                runs.append((start, i - start))
            start = i
    return runs


def spikes(values: torch.Tensor, period: int = 168, weeks: int = 2, threshold: float = 8.0) -> list[int]:
    """Hours far from the same hour of the same weekday in the neighbouring ``weeks``: more than
    ``threshold`` robust deviations (MAD of the week-over-week differences) from their median."""
    n = len(values)
    if n < 2 * period:
        return []
    neighbours = []
    for k in range(1, weeks + 1):
        for shift in (-k * period, k * period):
            idx = torch.arange(n) + shift
            valid = (idx >= 0) & (idx < n)
            neighbours.append(torch.where(valid, values[idx.clamp(0, n - 1)], torch.tensor(float("nan"))))
    reference = torch.stack(neighbours).nanmedian(dim=0).values
    deviation = values - reference
    mad = (values[period:] - values[:-period]).abs().median().clamp_min(1e-6)
    return torch.nonzero(deviation.abs() > threshold * 1.4826 * mad).flatten().tolist()


def check_site(site: SiteData, min_flat: int = 6) -> QualityReport:
    load = site.load
    report = QualityReport(site.site_id, len(load))
    report.missing = int(torch.isnan(load).sum())
    clean = torch.nan_to_num(load)
    report.negative = int((clean < 0).sum())
    report.flat_runs = flat_runs(clean, min_flat)
    report.spikes = spikes(clean)
    return report
