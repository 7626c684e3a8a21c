"""patchcast: patch-based transformer forecasting for multivariate time series."""

__version__ = "0.2.0"
