import torch

from hartrack.engine.metrics import MetricTracker, score


def test_tracker():
    t = MetricTracker(3)
    batch = {"x": torch.zeros(4, 6, 8), "activity": torch.tensor([0, 1, 2, 2]), "hr": torch.tensor([60.0, 70, 80, 90])}
    out = {"logits": torch.eye(3)[[0, 1, 2, 0]], "hr": torch.tensor([62.0, 70, 80, 86])}
    t.update(out, batch)
    m = t.compute()
    assert m["acc"] == 0.75 and abs(m["hr_mae"] - 1.5) < 1e-6
    assert score(m) == m["f1"] - m["hr_mae"] / 20.0
