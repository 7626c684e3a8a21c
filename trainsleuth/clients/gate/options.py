"""Option parsing shared by the program rules: GNU-style options, a wrapper's command, folders."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trainsleuth.clients.gate.analysis import Analysis
from trainsleuth.clients.gate.model import Command, Cwds, Outcome, Word

# A program's rule: record its writes on the analysis; return where the shell is afterwards (None: unchanged).
Rule = Callable[[Analysis, Command, str, list[Word]], "Outcome | None"]


@dataclass
class Parsed:
    options: list[tuple[str, Word | None]]  # (name, value) in order; name like "-t" or "--target"
    operands: list[Word]

    def has(self, *names: str) -> bool:
        return any(n in names for n, _ in self.options)

    def value(self, *names: str) -> Word | None:
        for n, v in self.options:
            if n in names:
                return v
        return None

    def values(self, *names: str) -> list[Word | None]:
        return [v for n, v in self.options if n in names]


def parse(
    args: list[Word], with_value: str = "", long_with_value: Iterable[str] = (), *, posix: bool = False
) -> Parsed:
    """Split arguments into options and operands (GNU style: options anywhere unless `posix`).

    `with_value` lists short options that take a value ("tSo"), `long_with_value` long ones
    ("--target-directory"); `--opt=value` always carries its value. After `--` all are operands.
    """
    long_values = set(long_with_value)
    options: list[tuple[str, Word | None]] = []
    operands: list[Word] = []
    i = 0
    while i < len(args):
        w = args[i]
        t = w.text
        i += 1
        if t is None or t == "-" or not t.startswith("-") or (operands and posix):
            operands.append(w)
            if posix:
                operands.extend(args[i:])
                break
            continue
        if t == "--":
            operands.extend(args[i:])
            break
        if t.startswith("--"):
            name, eq, val = t.partition("=")
            if eq:
                options.append((name, Word(val, w.glob, val)))
            elif name in long_values:
                options.append((name, args[i] if i < len(args) else None))
                i += 1
            else:
                options.append((name, None))
            continue
        cluster = t[1:]
        for j, ch in enumerate(cluster):
            if ch in with_value:
                rest = cluster[j + 1 :]
                if rest:
                    options.append((f"-{ch}", Word(rest, w.glob, rest)))
                else:
                    options.append((f"-{ch}", args[i] if i < len(args) else None))
                    i += 1
                break
            options.append((f"-{ch}", None))
    return Parsed(options, operands)


def split_command(
    args: list[Word], with_value: str = "", long_with_value: Iterable[str] = ()
) -> tuple[Parsed, list[Word]]:
    """A wrapper's own options, then the command it runs (from the first operand on)."""
    parsed = parse(args, with_value, long_with_value, posix=True)
    return Parsed(parsed.options, []), parsed.operands


def _name(word: Word) -> str:
    return word.text or word.source or "?"


def _same(cmd: Command) -> Outcome:
    return Outcome.same(cmd.cwds)


def _run(an: Analysis, cmd: Command, words: list[Word]) -> Outcome:
    """Analyse the command a wrapper runs (same folder, same stdin)."""
    if not words:
        return _same(cmd)
    return an.command(Command(words, cmd.cwds, cmd.depth, cmd.stdin, cmd.stdin_file, cmd.stdin_dynamic))


def _in_dir(cwds: Cwds, word: Word | None) -> Cwds:
    """The folders after changing into `word` from each of `cwds`."""
    if word is None or word.text is None or word.glob:
        return frozenset({None})
    target = os.path.expanduser(word.text)
    if os.path.isabs(target):
        return frozenset({os.path.normpath(target)})
    return frozenset(None if c is None else os.path.normpath(os.path.join(c, target)) for c in cwds)
