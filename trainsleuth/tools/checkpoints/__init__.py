"""Checkpoint comparison without executing pickled code (`diff_checkpoints`)."""
