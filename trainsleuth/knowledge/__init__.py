"""Failure-mode catalog, checklists, fix patterns, project constraints."""
