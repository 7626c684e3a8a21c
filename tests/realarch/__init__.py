"""Real-architecture probe suite: entrypoints built from public model code (no downloads)."""
