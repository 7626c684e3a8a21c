from patchcast.training.trainer import FitResult, Trainer, evaluate

__all__ = ["FitResult", "Trainer", "evaluate"]
