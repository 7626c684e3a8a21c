"""The investigation state machine (its store is `trainsleuth/state/`). No MCP imports here."""
