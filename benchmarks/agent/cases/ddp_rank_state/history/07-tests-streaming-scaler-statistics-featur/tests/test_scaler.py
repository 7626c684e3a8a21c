import pytest
import torch

from loadcast.data import FeatureScaler


def test_streaming_fit_matches_full_statistics():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1000, 5, generator=gen) * torch.arange(1, 6) + 3
    y = torch.randn(1000, generator=gen) * 7 + 50
    batches = [(x[i : i + 128], y[i : i + 128]) for i in range(0, 1000, 128)]
    scaler = FeatureScaler(5).fit(batches)
    assert torch.allclose(scaler.x_mean, x.mean(0), atol=1e-5)
    assert torch.allclose(scaler.x_std, x.std(0), atol=1e-4)
    assert torch.allclose(scaler.y_std, y.std(), atol=1e-4)
    assert torch.allclose(scaler.inverse_y(scaler.transform_y(y)), y, atol=1e-4)


def test_unfitted_scaler_refuses():
    with pytest.raises(RuntimeError):
        FeatureScaler(3).transform_x(torch.zeros(2, 3))


def test_statistics_are_in_the_state_dict():
    assert {"x_mean", "x_std", "y_mean", "y_std", "fitted"} <= set(FeatureScaler(2).state_dict())
