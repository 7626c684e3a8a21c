"""Compare with what works (issue 20): `compare_runs` (two runs aligned by step, the first metric
that leaves the good run's noise band, config and environment differences ranked by the
failure-mode catalog, a bisect offer) and `check_resume` (save, restore in a fresh process,
continue, and name what the resume did not restore).

Plain library, no MCP imports; numpy and matplotlib are imported lazily.
"""
