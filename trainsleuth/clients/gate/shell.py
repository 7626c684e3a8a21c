"""What a shell command line writes, read with a real bash parser (tree-sitter-bash).

The edit gate must know which files a command writes before it runs. A command line is parsed
into bash's own grammar (pipelines, lists, subshells, compound commands, functions, redirections,
here-documents, substitutions) and every simple command in it, including those nested in
`$(...)`, `<(...)`, `bash -c '...'`, `eval`, sourced scripts and wrappers such as `env`,
`timeout` or `xargs`, is looked up in `rules.py`, which knows what each program writes.

The analysis is conservative: anything it cannot see through (a variable or command substitution
as a target, an unknown program, a construct the parser does not understand, `python -c`) is a
write to an unknown place, which the gate treats like a write of a gated file. It never runs
anything.

Work is linear in the length of the command: tree-sitter parses in one pass, every syntax node is
visited a bounded number of times, at most MAX_CWDS candidate working folders are tracked, and text
parsed again (`bash -c` payloads, `eval`, scripts) is limited in nesting depth and size. `Analysis.steps` counts the nodes visited and the bytes parsed,
so tests can check the bound without a clock.
"""

from __future__ import annotations

from trainsleuth.clients.gate.analysis import MAX_DEPTH, Analysis
from trainsleuth.clients.gate.builtins import check_assignment
from trainsleuth.clients.gate.model import (
    HERE,
    MAX_CWDS,
    Command,
    Cwds,
    Outcome,
    Word,
    Write,
    bounded,
)
from trainsleuth.clients.gate.rules import analyse_command

__all__ = [
    "HERE",
    "MAX_CWDS",
    "MAX_DEPTH",
    "Analysis",
    "Command",
    "Cwds",
    "Outcome",
    "Word",
    "Write",
    "analyse",
    "bounded",
    "shell_writes",
]


def _assignment_rule(an: Analysis, name: str, value: Word, persistent: bool) -> None:
    check_assignment(an, name, value, persistent=persistent)


def analyse(command: str, *, base: str = "") -> Analysis:
    """Every write of a command line run in `base` (the hook's folder)."""
    analysis = Analysis(analyse_command, _assignment_rule, base=base)
    analysis.script(command, HERE, 0)
    return analysis


def shell_writes(command: str, *, base: str = "") -> list[Write]:
    return analyse(command, base=base).writes
