"""What in a text log is not a metric record, though the line parsers would read numbers in it.

Logs often begin with things that look like metrics: the training script itself (modded-nanogpt
and others print their own source, which holds `val_loss = 0.0`), an argparse `Namespace(...)`,
nanoGPT's `Overriding: lr = 3e-4`, a YAML or `key = value` config dump. Read as metrics they
make settings into one-point series and, worse, prepend a fake value to a real series (a
`val_loss` of 0.0 before the first evaluation looks like overfitting). `LineFilter` recognises them
line by line, and every line it sets aside is counted by reason in the parse report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# A line that starts Python source: the log holds the script from here on.
_CODE_START = re.compile(
    r"^(?:import\s+\w[\w.]*(?:\s+as\s+\w+)?(?:\s*,\s*\w[\w.]*(?:\s+as\s+\w+)?)*\s*$"
    r"|from\s+[\w.]+\s+import\s+\S"
    r"|def\s+\w+\s*\("
    r"|class\s+\w+\s*[(:]"
    r"|if\s+__name__\s*==)"
)
# a rule of `=` across the line: where a printed script ends (modded-nanogpt prints one after its source)
_SCRIPT_END = re.compile(r"^\s*={20,}\s*$")
# settings lines: an argparse `Namespace(...)` anywhere, nanoGPT's `Overriding: ...`, `args = {...}`
_SETTINGS_START = re.compile(r"\s*(?:Overriding\b|(?:args|config|hparams|hyperparameters)\s*[:=]\s*[{(\[])")
# `amp=False`, `cache=None`, `optimizer=auto`: settings; a line with three or more is a settings dump
# (Ultralytics prints all its arguments on one line)
_WORD_SETTING = re.compile(r"\b[A-Za-z_]\w*=(?:True|False|None|[A-Za-z_][\w./-]*)(?=[,\s)]|$)")
# `name = value` / `name: value` alone on its line (a setting when several distinct ones follow each other)
_ASSIGNMENT = re.compile(r"""^\s*["']?[A-Za-z_][\w.\-\[\]]*["']?\s*[:=]\s*\S[^=:]*?\s*(?:#.*)?,?\s*$""")
# lines that may sit inside a config block without ending it: blank, comments, `key:` headers,
# settings whose value is not a number
_NEUTRAL = re.compile(
    r"""^\s*(?:$|#|//|-{3,}\s*$|["']?[A-Za-z_][\w.\-]*["']?\s*[:=]\s*(?:$|[^\d\s\-+.][^=]*$))"""
)
CONFIG_BLOCK_MIN = 3

SCRIPT = "training script printed in the log"
SETTINGS = "argparse Namespace or config override"
CONFIG = "config dump (a block of distinct settings)"
PROGRESS = "progress bar without metric values"
ERROR = "error or traceback line (numbers there are not metrics)"
OVERFLOW = "fp16 overflow notice (counted as a skipped step)"
NO_METRIC = "other lines with numbers but no metric record"


@dataclass
class LineFilter:
    """Line-by-line state: inside a printed script or not, and a pending run of settings."""

    in_script: bool = False
    pending: list[tuple[str, list[tuple[float | None, dict[str, float], str]]]] = field(default_factory=list)
    pending_keys: set[str] = field(default_factory=set)
    neutral: int = 0  # neutral lines inside the pending run

    def script_starts(self, line: str) -> bool:
        if not self.in_script and _CODE_START.match(line):
            self.in_script = True
        return self.in_script

    def script_ends(self, line: str) -> bool:
        if self.in_script and _SCRIPT_END.match(line):
            self.in_script = False
            return True
        return False

    @staticmethod
    def is_settings(line: str) -> bool:
        return (
            "Namespace(" in line
            or _SETTINGS_START.match(line) is not None
            or (line.count("=") >= 3 and len(_WORD_SETTING.findall(line)) >= 3)
        )

    @staticmethod
    def is_neutral(line: str) -> bool:
        return bool(_NEUTRAL.match(line))

    @staticmethod
    def setting_key(line: str, recs: list[tuple[float | None, dict[str, float], str]]) -> str | None:
        """The key when `line` is a lone setting (`lr = 3e-4`, `  batch_size: 64`), else None."""
        if len(recs) != 1:
            return None
        step, metrics, _ = recs[0]
        if step is not None or len(metrics) != 1 or not _ASSIGNMENT.match(line):
            return None
        return next(iter(metrics))
