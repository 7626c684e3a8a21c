"""The per-user state layer below `protocol/` and `tools/`: where state lives, its seal, the SQLite store."""
