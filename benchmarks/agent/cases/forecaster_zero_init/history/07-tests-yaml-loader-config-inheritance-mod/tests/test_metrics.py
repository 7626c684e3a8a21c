import torch

from patchcast.metrics import MetricAccumulator, mae, mase, mse, per_horizon_mse, smape


def test_perfect_forecast():
    y = torch.randn(4, 6, 2)
    assert mse(y, y) == 0 and mae(y, y) == 0 and smape(y, y) == 0


def test_mase_of_naive_on_random_walk_is_about_one():
    gen = torch.Generator().manual_seed(0)
    walk = torch.cumsum(torch.randn(64, 200, 1, generator=gen), 1)
    history, future = walk[:, :150], walk[:, 150:151]
    naive = history[:, -1:]
    assert 0.7 < float(mase(naive, future, history)) < 1.3


def test_per_horizon_shape():
    assert per_horizon_mse(torch.zeros(2, 5, 3), torch.ones(2, 5, 3)).shape == (5,)


def test_accumulator_weights_by_batch_size():
    acc = MetricAccumulator()
    acc.update(torch.zeros(1, 2, 1), torch.ones(1, 2, 1))
    acc.update(torch.zeros(3, 2, 1), torch.zeros(3, 2, 1))
    assert abs(acc.compute()["mse"] - 0.25) < 1e-9
