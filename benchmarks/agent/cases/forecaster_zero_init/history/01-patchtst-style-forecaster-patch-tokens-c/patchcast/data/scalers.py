"""Dataset-level scaling fitted on the training split only."""

from __future__ import annotations

import torch


class StandardScaler:
    """Per-channel standardisation; ``fit`` on the training part, then ``transform`` everything."""

    def __init__(self, eps: float = 1e-5) -> None:
        self.eps = eps
        self.mean: torch.Tensor | None = None
        self.std: torch.Tensor | None = None

    def fit(self, series: torch.Tensor) -> "StandardScaler":
        self.mean = series.mean(0, keepdim=True)
        self.std = series.std(0, keepdim=True).clamp_min(self.eps)
        return self

    def _check(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mean is None or self.std is None:
            raise RuntimeError("StandardScaler used before fit()")
        return self.mean, self.std

    def transform(self, series: torch.Tensor) -> torch.Tensor:
        mean, std = self._check()
        return (series - mean) / std

    def inverse_transform(self, series: torch.Tensor) -> torch.Tensor:
        mean, std = self._check()
        return series * std + mean

    def state_dict(self) -> dict[str, torch.Tensor | None]:
        return {"mean": self.mean, "std": self.std}

    def load_state_dict(self, state: dict[str, torch.Tensor | None]) -> None:
        self.mean, self.std = state["mean"], state["std"]
