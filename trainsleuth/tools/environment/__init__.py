"""Interpreter environments: versions and variables, and their differences (`environment_report`)."""
