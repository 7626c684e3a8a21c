import torch

from loadcast.models import LoadModel
from loadcast.models.baselines import DegreeDayBaseline
from loadcast.data import SiteStore, read_sites


def test_model_predicts_kwh_through_its_scaler():
    train, _ = read_sites(SiteStore(3, hours=24 * 20), [0, 1, 2], 0.8)
    model = LoadModel(train.x.shape[1], width=16, depth=1)
    model.scaler.fit([(train.x, train.y)])
    out = model(train.x[:10])
    assert out.shape == (10,)
    # an untrained net outputs about 0 in standardised units, i.e. about the mean load
    assert (out - train.y.mean()).abs().max() < 3 * train.y.std()


def test_degree_day_baseline_fits_each_site():
    train, val = read_sites(SiteStore(2, hours=24 * 60), [0, 1], 0.8)
    pred = DegreeDayBaseline().fit(train.x, train.y, train.site).predict(val.x, val.site)
    assert (pred - val.y).abs().mean() < 0.5 * (val.y - val.y.mean()).abs().mean()
