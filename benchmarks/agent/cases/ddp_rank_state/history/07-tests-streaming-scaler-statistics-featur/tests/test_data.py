import pytest

from loadcast.data import FEATURES, SiteStore, read_sites, shard_sites, site_features, site_target


def test_sites_are_deterministic():
    a, b = SiteStore(4, hours=240).read(2), SiteStore(4, hours=240).read(2)
    assert a.area == b.area and (a.load == b.load).all()


def test_features():
    site = SiteStore(2, hours=24 * 14).read(0)
    x, y = site_features(site), site_target(site)
    assert x.shape == (24 * 13, len(FEATURES)) and y.shape == (24 * 13,)


def test_shards_cover_every_site_once():
    sites = list(range(10))
    shards = [shard_sites(sites, r, 3) for r in range(3)]
    assert sorted(s for shard in shards for s in shard) == sites
    with pytest.raises(ValueError):
        shard_sites(sites, 3, 3)


def test_time_split():
    train, val = read_sites(SiteStore(3, hours=24 * 11), [0, 1], 0.8)
    assert len(train.y) == 2 * 192 and len(val.y) == 2 * 48
    assert set(val.site.tolist()) == {0, 1}
