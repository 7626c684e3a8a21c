"""The investigation state machine and its SQLite store. No MCP imports here."""
