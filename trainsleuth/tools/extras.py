"""Optional features and the extra that installs each, so a missing one names what to install.

The core install stays small; `trainsleuth[tensorboard]`, `[plots]`, `[fast-csv]` and `[bisect]`
add the heavy parts (`[all]`: every one).
"""

from __future__ import annotations


def install_hint(extra: str) -> str:
    return f"pip install 'trainsleuth[{extra}]' (or: uv tool install 'trainsleuth[{extra}]')"


class MissingExtra(ImportError):
    """An optional feature whose package is not installed; the message says which extra has it."""

    def __init__(self, feature: str, extra: str) -> None:
        self.extra = extra
        self.message = f"{feature} needs the optional extra [{extra}]: {install_hint(extra)}"
        super().__init__(self.message)


__all__ = ["MissingExtra", "install_hint"]
