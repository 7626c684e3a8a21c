"""MCP wiring only: tool/resource/prompt registration, transports and workspace policy."""
