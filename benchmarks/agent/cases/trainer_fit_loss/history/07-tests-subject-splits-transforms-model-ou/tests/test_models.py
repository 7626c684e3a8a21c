import pytest
import torch

from hartrack.models import MultiTaskNet


@pytest.mark.parametrize("backbone", ["resnet1d", "tinycnn"])
@pytest.mark.parametrize("pool", ["attention", "meanmax", "mean"])
def test_outputs(backbone, pool):
    model = MultiTaskNet(n_classes=6, backbone=backbone, pool=pool, hr_init=100.0)
    out = model(torch.randn(4, 6, 128))
    assert out["logits"].shape == (4, 6) and out["hr"].shape == (4,)


def test_hr_head_starts_at_the_mean():
    model = MultiTaskNet(n_classes=6, hr_init=100.0).eval()
    hr = model(torch.randn(8, 6, 128))["hr"]
    assert (hr - 100.0).abs().max() < 5.0


def test_single_task():
    model = MultiTaskNet(n_classes=6, tasks=("activity",))
    assert "hr" not in model(torch.randn(2, 6, 128)) and model.hr_head is None
