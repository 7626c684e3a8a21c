"""The values the shell analysis passes around: words, writes, working folders, simple commands."""

from __future__ import annotations

from dataclasses import dataclass

SAFE_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "-"})


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal: its text, or None when it depends on run-time values."""

    text: str | None
    glob: bool = False  # holds unquoted *, ? or [...] (or a brace expansion): a pattern, not a name
    source: str = ""  # as written, for messages

    @property
    def static(self) -> bool:
        return self.text is not None

    @classmethod
    def literal(cls, text: str) -> Word:
        return cls(text, False, text)

    @classmethod
    def dynamic(cls, source: str) -> Word:
        return cls(None, False, source)


@dataclass(frozen=True)
class Write:
    """A file the command line writes: `path` (absolute, or relative to the hook's folder) or None
    when the place is not determinable; `why` says which command writes it."""

    path: str | None
    why: str
    pattern: bool = False  # `path` is a glob pattern (every file it matches is written)


# Where a command runs: candidate folders, relative to the hook's folder ("" is that folder);
# None is a folder the analysis cannot know (`cd "$DIR"`).
Cwds = frozenset[str | None]
HERE: Cwds = frozenset({""})


MAX_CWDS = 8  # candidate folders tracked; more collapse to "unknown" (keeps the work linear)


def bounded(cwds: Cwds) -> Cwds:
    """At most MAX_CWDS candidate folders: past that the folder is unknown."""
    if len(cwds) <= MAX_CWDS:
        return cwds
    return frozenset({None})


@dataclass(frozen=True)
class Outcome:
    """Candidate working folders after a statement, when it succeeded and when it failed."""

    ok: Cwds
    fail: Cwds

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", bounded(self.ok))
        object.__setattr__(self, "fail", bounded(self.fail))

    @classmethod
    def same(cls, cwds: Cwds) -> Outcome:
        return cls(cwds, cwds)

    @property
    def either(self) -> Cwds:
        return bounded(self.ok | self.fail)


@dataclass
class Command:
    """A simple command ready for a rule in commands.py."""

    words: list[Word]
    cwds: Cwds
    depth: int
    stdin: str | None = None  # static text of a here-document or here-string, if any
    stdin_file: Word | None = None  # `< FILE`
    stdin_dynamic: bool = False  # a here-document with expansions
