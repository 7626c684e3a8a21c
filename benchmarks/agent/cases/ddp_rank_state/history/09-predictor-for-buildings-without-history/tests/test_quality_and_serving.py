import torch

from loadcast.analysis.residuals import by_hour, format_table
from loadcast.data import FEATURES, SiteStore, read_sites
from loadcast.data.quality import check_site, flat_runs, spikes
from loadcast.models import LoadModel
from loadcast.serve import Predictor
from loadcast.train import checkpoint


def test_quality_checks_find_stuck_meters_and_spikes():
    assert flat_runs(torch.tensor([1.0, 2, 2, 2, 2, 2, 2, 2, 3]), min_length=6) == [(1, 7)]
    values = 5 + 0.1 * torch.randn(800, generator=torch.Generator().manual_seed(0))
    values[400] = 50
    assert spikes(values) == [400]
    site = SiteStore(2, hours=24 * 20).read(0)
    assert check_site(site).ok


def test_predictor_round_trip(tmp_path):
    train, _ = read_sites(SiteStore(2, hours=24 * 20), [0, 1], 0.8)
    model = LoadModel(len(FEATURES), width=16, depth=1)
    model.scaler.fit([(train.x, train.y)])
    checkpoint.save(tmp_path / "m.pt", model, None, epoch=1)
    predictor = Predictor.from_checkpoint(tmp_path / "m.pt", width=16, depth=1)
    weather = SiteStore(3, hours=24 * 4).read(2)
    forecast = predictor.predict(weather)
    assert forecast.kwh.shape == (72,) and len(predictor.daily_peak(weather)) == 3


def test_residual_tables():
    x = torch.zeros(48, len(FEATURES))
    hours = torch.arange(48) % 24
    x[:, FEATURES.index("hour_sin")] = torch.sin(2 * torch.pi * hours / 24)
    x[:, FEATURES.index("hour_cos")] = torch.cos(2 * torch.pi * hours / 24)
    rows = by_hour(torch.ones(48), torch.zeros(48), x)
    assert sum(r["n"] for r in rows) == 48 and all(r["bias"] == 1.0 for r in rows)
    assert "by hour" in format_table("by hour", rows)
