"""Baseline for benchmarks/startup.py: the smallest useful server on the same SDK (one tool, stdio)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    server.run("stdio")
