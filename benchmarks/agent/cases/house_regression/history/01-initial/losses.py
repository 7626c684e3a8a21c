import torch


def huber(pred: torch.Tensor, target: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """Huber loss: quadratic near zero, linear for outliers (a few listings have absurd prices)."""
    diff = pred - target
    quad = 0.5 * diff**2
    lin = delta * (diff.abs() - 0.5 * delta)
    return torch.where(diff.abs() <= delta, quad, lin).mean()
