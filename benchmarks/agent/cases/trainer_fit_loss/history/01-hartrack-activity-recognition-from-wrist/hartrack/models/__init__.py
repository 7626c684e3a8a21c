from hartrack.models.multitask import MultiTaskNet, build_model

__all__ = ["MultiTaskNet", "build_model"]
