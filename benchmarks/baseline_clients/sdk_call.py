"""Baseline for `benchmarks/surface.py`: the same one call with the SDK's own client, nothing else.

python benchmarks/baseline_clients/sdk_call.py path/to/trainsleuth
"""

from __future__ import annotations

import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(trainsleuth: str) -> None:
    params = StdioServerParameters(command=trainsleuth, args=["serve"])
    async with Client(params) as client:
        result = await client.call_tool("list_investigations", {})
        print(result.content[0].text if result.content else "")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
