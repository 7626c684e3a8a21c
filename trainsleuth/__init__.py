"""trainsleuth: an MCP server that debugs machine-learning training with an enforced protocol."""

__version__ = "0.1.0"
