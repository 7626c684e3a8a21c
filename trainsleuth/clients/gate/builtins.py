"""Shell builtins, wrappers and shells: what runs a command inside a command.

`cd`/`pushd` move the working folder; `eval`, `source`, `trap`, `bash -c`, `bash FILE` and `watch`
are parsed again; `env`, `sudo`, `nice`, `timeout`, `xargs`, `stdbuf`, `uv run`, ... are unwrapped and
the command they run is analysed; assignments of variables that change which program runs (PATH,
LD_PRELOAD, GIT_DIR, ...) count as writes to an unknown place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from trainsleuth.clients.gate.analysis import Analysis
from trainsleuth.clients.gate.model import Command, Outcome, Word
from trainsleuth.clients.gate.options import Rule, _in_dir, _run, _same, split_command

RISKY_VARIABLES = frozenset(
    [
        "LD_PRELOAD",
        "LD_AUDIT",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "DYLD_LIBRARY_PATH",
        "PATH",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_EXTERNAL_DIFF",
        "GIT_PAGER",
        "PAGER",
        "GIT_CONFIG",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "EDITOR",
        "VISUAL",
        "GIT_ASKPASS",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "NODE_OPTIONS",
    ]
)


_SEARCH_PATHS = frozenset({"PATH", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"})
_SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/private/tmp")


def _benign_search_path(name: str, value: Word) -> bool:
    """`PATH=/usr/local/cuda/bin:$PATH`: only the old value and fixed system folders."""
    for part in value.source.strip("\"'").split(":"):
        if part in ("", f"${name}", f"${{{name}}}"):
            continue
        if not part.startswith("/") or any(ch in part for ch in "$`*?[") or ".." in part:
            return False
        if part.startswith(_SCRATCH_DIRS) or ".trainsleuth" in part:
            return False
    return True


def check_assignment(an: Analysis, name: str, value: Word, *, persistent: bool) -> None:
    """`NAME=value` before or between commands: some variables change what later programs run."""
    if name in _SEARCH_PATHS and _benign_search_path(name, value):
        return
    if name in RISKY_VARIABLES or name.startswith("GIT_CONFIG_"):
        an.unknown(f"setting {name} changes which program or code runs next")


def local_program(an: Analysis, cmd: Command, name: Word, args: list[Word]) -> Outcome:
    """`./script.sh ARGS`: shell scripts are read and analysed; Python scripts run; others unknown."""
    assert name.text is not None
    head = b""
    for cwd in cmd.cwds:
        path = os.path.expanduser(name.text)
        full = path if os.path.isabs(path) else os.path.join(an.base, cwd or "", path)
        try:
            with open(full, "rb") as fh:
                head = fh.read(128)
        except OSError:
            head = b""
        break
    first = head.split(b"\n", 1)[0]
    if first.startswith(b"#!") and re.search(rb"\b(bash|sh|dash|zsh|ksh)\b", first):
        an.script_file(name, cmd.cwds, cmd.depth, f"`{name.text}`")
        return _same(cmd)
    if first.startswith(b"#!") and re.search(rb"python", first):
        return _same(cmd)
    an.unknown(f"the gate does not know whether `{name.text}` writes files")
    return _same(cmd)


# ------------------------------------------------------------------------------------- shell builtins


def cd_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    operands = [a for a in args if not (a.text or "").startswith("-") or a.text == "-"]
    if prog == "popd" or (operands and operands[0].text == "-"):
        return Outcome(frozenset({None}), cmd.cwds)
    if not operands:
        return Outcome(frozenset({os.path.expanduser("~")}), cmd.cwds)
    return Outcome(_in_dir(cmd.cwds, operands[0]), cmd.cwds)


def eval_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    if any(not a.static for a in args):
        an.unknown("`eval` of text only known when it runs")
        return _same(cmd)
    return an.script(" ".join(a.text or "" for a in args), cmd.cwds, cmd.depth + 1)


def source_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    if not args:
        return _same(cmd)
    script = args[0].text or ""
    if (
        re.fullmatch(r"[\w./~-]*\bbin/activate", script)
        and ".trainsleuth" not in script
        and not script.startswith(_SCRATCH_DIRS)
    ):
        return _same(cmd)  # a virtual environment's activation script: it sets PATH and a prompt
    return an.script_file(args[0], cmd.cwds, cmd.depth, f"`{prog}`")


def alias_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    if any("=" in (a.text or "=") for a in args):
        an.unknown(f"`{prog}` makes a name run another command")
    return None


def exec_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    _, rest = split_command(args, "a")
    return _run(an, cmd, rest)


def command_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    opts, rest = split_command(args)
    if opts.has("-v", "-V"):
        return _same(cmd)
    return _run(an, cmd, rest)


def builtin_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    return _run(an, cmd, args)


def set_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    return None


def hash_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    if any(a.text == "-p" or a.text is None for a in args):
        an.unknown("`hash -p` makes a name run another program")
    return None


def enable_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    if any((a.text or "-f").startswith("-f") for a in args):
        an.unknown("`enable -f` loads a builtin from a file")
    return None


def trap_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    operands = [a for a in args if not (a.text or "x").startswith("-")]
    if operands:
        if operands[0].static:
            an.script(operands[0].text or "", cmd.cwds, cmd.depth + 1)
        else:
            an.unknown("`trap` of a command only known when it runs")
    return None


def declare_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    for a in args:
        name = (a.text or "").split("=", 1)[0]
        if a.text is None or name in RISKY_VARIABLES:
            an.unknown(f"`{prog}` sets a variable that changes which program runs")
    return None


# ------------------------------------------------------------------------------------- wrappers


def _wrapper(with_value: str = "", long_with_value: Iterable[str] = (), positional: int = 0) -> Rule:
    """A wrapper with options (some taking a value), `positional` fixed operands, then the command."""
    long_values = tuple(long_with_value)

    def rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
        _, rest = split_command(args, with_value, long_values)
        return _run(an, cmd, rest[positional:])

    return rule


def env_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    opts, rest = split_command(args, "uCS", ("--unset", "--chdir", "--split-string"))
    cwds = cmd.cwds
    for name, value in opts.options:
        if name in ("-C", "--chdir"):
            cwds = _in_dir(cwds, value)
        if name in ("-S", "--split-string"):
            if value is None or value.text is None:
                an.unknown("`env -S` of a command only known when it runs")
                return _same(cmd)
            an.script(value.text + " " + " ".join(_quote(w) for w in rest), cwds, cmd.depth + 1)
            return _same(cmd)
    while rest and rest[0].text is not None and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", rest[0].text):
        check_assignment(an, rest[0].text.split("=", 1)[0], rest[0], persistent=False)
        rest = rest[1:]
    if rest and rest[0].text is None:
        an.unknown("`env` runs a program only known when it runs")
        return _same(cmd)
    if not rest:
        return _same(cmd)
    an.command(Command(rest, cwds, cmd.depth, cmd.stdin, cmd.stdin_file, cmd.stdin_dynamic))
    return _same(cmd)


def _quote(word: Word) -> str:
    if word.text is None:
        return '"$UNKNOWN"'
    return "'" + word.text.replace("'", "'\\''") + "'"


def sudo_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    opts, rest = split_command(
        args, "ugCDhprtTUc", ("--user", "--group", "--chdir", "--host", "--prompt", "--role", "--type",
                            "--other-user", "--close-from", "--command-timeout", "--login-class"),
    )  # fmt: skip
    if opts.has("-e", "--edit"):
        for w in rest:
            an.write(w, "`sudoedit`", cmd.cwds)
        return _same(cmd)
    if prog == "su":
        command = opts.value("-c", "--command")
        if command is not None and command.static:
            return an.script(command.text or "", cmd.cwds, cmd.depth + 1)
        an.unknown("`su` starts a shell")
        return _same(cmd)
    if opts.has("-s", "-i", "--shell", "--login") and not rest:
        an.unknown(f"`{prog}` starts a shell")
        return _same(cmd)
    cwds = _in_dir(cmd.cwds, opts.value("-D", "--chdir")) if opts.has("-D", "--chdir") else cmd.cwds
    if not rest:
        return _same(cmd)
    an.command(Command(rest, cwds, cmd.depth, cmd.stdin, cmd.stdin_file, cmd.stdin_dynamic))
    return _same(cmd)


def timeout_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    _, rest = split_command(args, "sk", ("--signal", "--kill-after"))
    return _run(an, cmd, rest[1:])


def xargs_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    opts, rest = split_command(
        args, "aEeIiLlnPsd", ("--arg-file", "--eof", "--replace", "--max-lines", "--max-args", "--max-procs",
                             "--max-chars", "--delimiter", "--process-slot-var"),
    )  # fmt: skip
    if not rest:
        rest = [Word.literal("echo")]
    replace = opts.value("-I", "--replace", "-i")
    unknown = Word.dynamic("(input from stdin)")
    if replace is not None and replace.text:
        token = replace.text
        words = [unknown if (w.text is not None and token in w.text) else w for w in rest]
    else:
        words = [*rest, unknown]
    return _run(an, Command(words, cmd.cwds, cmd.depth), words)


def watch_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    opts, rest = split_command(args, "nqd", ("--interval", "--differences", "--chgexit", "--equexit"))
    if opts.has("-x", "--exec"):
        return _run(an, cmd, rest)
    if any(not w.static for w in rest):
        an.unknown("`watch` of a command only known when it runs")
        return _same(cmd)
    an.script(" ".join(w.text or "" for w in rest), cmd.cwds, cmd.depth + 1)
    return _same(cmd)


def flock_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    opts, rest = split_command(args, "wEc", ("--timeout", "--conflict-exit-code", "--command"))
    command = opts.value("-c", "--command")
    if rest:
        an.write(rest[0], "`flock` (lock file)", cmd.cwds)
    if command is not None:
        if command.static:
            an.script(command.text or "", cmd.cwds, cmd.depth + 1)
        else:
            an.unknown("`flock -c` of a command only known when it runs")
        return _same(cmd)
    if len(rest) > 1 and rest[1].text is not None and rest[1].text in ("-c", "--command"):
        if len(rest) > 2 and rest[2].static:
            an.script(rest[2].text or "", cmd.cwds, cmd.depth + 1)
        else:
            an.unknown("`flock -c` of a command only known when it runs")
        return _same(cmd)
    return _run(an, cmd, rest[1:])


def tracer_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    """strace/ltrace/valgrind/perf/nsys/ncu/py-spy/kernprof: the output file, then the command."""
    words = args
    sub = ""
    if (
        prog in ("perf", "nsys", "py-spy", "scalene")
        and words
        and words[0].text
        and not words[0].text.startswith("-")
    ):
        sub = words[0].text
        words = words[1:]
    opts, rest = split_command(
        words, "opsePEuSaIc", ("--output", "--log-file", "--pid", "--rate", "--duration", "--format",
                              "--trace", "--event", "--export", "--outfile"),
    )  # fmt: skip
    outputs = opts.values("-o", "--output", "--log-file", "--outfile")
    for out in outputs:
        an.write(out, f"`{prog}` output", cmd.cwds)
    if prog == "perf" and sub == "record" and not outputs:
        an.write(Word.literal("perf.data"), "`perf record` output", cmd.cwds)
    if prog == "nsys" and sub == "profile" and not outputs:
        an.write(Word.literal("report1.nsys-rep"), "`nsys profile` output", cmd.cwds)
    if prog == "py-spy" and sub == "record" and not outputs:
        an.unknown("`py-spy record` writes a profile named after the program")
    return _run(an, cmd, rest)


def shell_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    """`bash -c TEXT`, `bash FILE`, `bash <<EOF`: the script is parsed in turn."""
    i = 0
    command: Word | None = None
    while i < len(args):
        t = args[i].text
        if t is None:
            an.unknown(f"`{prog}` with an argument only known when it runs")
            return _same(cmd)
        if t in ("-o", "-O", "+O", "+o", "--rcfile", "--init-file"):
            i += 2
            continue
        if t == "--":
            i += 1
            break
        if t.startswith("-") and len(t) > 1 and not t.startswith("--"):
            if "c" in t[1:]:
                command = args[i + 1] if i + 1 < len(args) else None
                if command is None or command.text is None:
                    an.unknown(f"`{prog} -c` of text only known when it runs")
                    return _same(cmd)
                an.script(command.text, cmd.cwds, cmd.depth + 1)
                return _same(cmd)
            if "s" in t[1:]:
                i = len(args)
                break
            i += 1
            continue
        if t.startswith("--") or t.startswith("+"):
            i += 1
            continue
        break
    if i < len(args):
        an.script_file(args[i], cmd.cwds, cmd.depth, f"`{prog}`")
        return _same(cmd)
    if cmd.stdin is not None and not cmd.stdin_dynamic:
        an.script(cmd.stdin, cmd.cwds, cmd.depth + 1)
    elif cmd.stdin_file is not None:
        an.script_file(cmd.stdin_file, cmd.cwds, cmd.depth, f"`{prog} <`")
    else:
        an.unknown(f"`{prog}` reads commands from stdin, which the gate cannot see")
    return _same(cmd)
