"""Each diagnostic capability as a plain Python library, usable and tested without MCP.

Nothing here imports `trainsleuth.server`; the server wraps these functions as tools.
"""
