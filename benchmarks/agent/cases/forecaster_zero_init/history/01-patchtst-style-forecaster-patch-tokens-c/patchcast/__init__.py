"""patchcast: patch-based transformer forecasting for multivariate time series."""

__version__ = "0.1.0"
