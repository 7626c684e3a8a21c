"""Where is the model wrong? Residuals binned by hour of day, temperature and site size."""

from __future__ import annotations

import torch

from loadcast.data.features import FEATURES

_COL = {name: i for i, name in enumerate(FEATURES)}


def _hour(x: torch.Tensor) -> torch.Tensor:
    return (torch.atan2(x[:, _COL["hour_sin"]], x[:, _COL["hour_cos"]]) * 24 / (2 * torch.pi)).round() % 24


@torch.no_grad()
def binned_errors(pred: torch.Tensor, target: torch.Tensor, key: torch.Tensor, edges: list[float]) -> list[dict]:
    """Mean error (bias) and MAE of ``pred - target`` in the bins of ``key`` given by ``edges``."""
    err = pred - target
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (key >= lo) & (key < hi)
        if m.any():
            rows.append({"bin": f"[{lo:g}, {hi:g})", "n": int(m.sum()), "bias": err[m].mean().item(), "mae": err[m].abs().mean().item()})
    return rows


def by_hour(pred: torch.Tensor, target: torch.Tensor, x: torch.Tensor) -> list[dict]:
    return binned_errors(pred, target, _hour(x), [float(h) for h in range(0, 25, 3)])


def by_temperature(pred: torch.Tensor, target: torch.Tensor, x: torch.Tensor) -> list[dict]:
    return binned_errors(pred, target, x[:, _COL["temperature"]], [-30, -10, 0, 10, 20, 30, 50])


def by_size(pred: torch.Tensor, target: torch.Tensor, x: torch.Tensor) -> list[dict]:
    area = x[:, _COL["log_area"]].exp()
    return binned_errors(pred, target, area, [0, 1, 3, 10, 30, 100])


def format_table(title: str, rows: list[dict]) -> str:
    lines = [title, f"  {'bin':>14} {'n':>7} {'bias':>9} {'mae':>9}"]
    for r in rows:
        lines.append(f"  {r['bin']:>14} {r['n']:>7} {r['bias']:>9.3f} {r['mae']:>9.3f}")
    return "\n".join(lines)
