"""Performance and accuracy benchmarks: `python -m benchmarks` (or `make bench`) runs them all.

See `benchmarks/common.py` for the protocol a benchmark follows and `docs/benchmarks.md` for the figures.
"""
