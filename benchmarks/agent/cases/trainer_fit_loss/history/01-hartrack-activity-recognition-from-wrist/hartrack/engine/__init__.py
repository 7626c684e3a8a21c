from hartrack.engine.callbacks import Callback, CallbackList
from hartrack.engine.trainer import Trainer

__all__ = ["Callback", "CallbackList", "Trainer"]
