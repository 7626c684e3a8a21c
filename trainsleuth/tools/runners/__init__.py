"""Standalone scripts that run in the *user's* interpreter (only torch and the standard library).

They are executed as files (`python path/to/runner.py ...`), never imported by the server,
so they work where trainsleuth itself is not installed. Modules here whose name starts with
`_ts_` are helpers the runner scripts import from their own directory.
"""
