"""A small time-series forecaster, written for the observer's tests in the style of a config-driven project."""
