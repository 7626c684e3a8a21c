"""Scripted CI client, client config installers, edit-gate hooks."""
