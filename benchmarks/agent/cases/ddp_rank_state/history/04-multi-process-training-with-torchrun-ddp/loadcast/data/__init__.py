from loadcast.data.features import FEATURES, site_features, site_target
from loadcast.data.loader import Data, build_data, read_sites, shard_sites
from loadcast.data.scaler import FeatureScaler
from loadcast.data.sites import SiteData, SiteStore

__all__ = [
    "FEATURES",
    "Data",
    "FeatureScaler",
    "SiteData",
    "SiteStore",
    "build_data",
    "read_sites",
    "shard_sites",
    "site_features",
    "site_target",
]
