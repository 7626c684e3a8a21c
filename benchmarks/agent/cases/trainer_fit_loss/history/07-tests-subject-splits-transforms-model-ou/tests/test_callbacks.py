from hartrack.engine.callbacks import CallbackList, EarlyStopping
from hartrack.engine.state import TrainerState


class FakeTrainer:
    def __init__(self):
        self.state = TrainerState()
        self.logged = []

    def log(self, message):
        self.logged.append(message)


def test_callback_list_calls_only_defined_hooks():
    seen = []

    class A:
        def on_fit_start(self, trainer):
            seen.append("a")

    CallbackList([A(), object()]).call("on_fit_start", None)
    assert seen == ["a"]


def test_early_stopping():
    trainer = FakeTrainer()
    stop = EarlyStopping(patience=2)
    for epoch, best in [(0, 0), (1, 0), (2, 0)]:
        trainer.state.epoch, trainer.state.best_epoch = epoch, best
        stop.on_validation_end(trainer, {})
    assert trainer.state.should_stop

