"""What each program writes: the command knowledge behind the edit gate's shell analysis.

`analyse_command` looks a simple command up by program name:
- readers and runners (`cat`, `grep`, `git log`, `python train.py`, `pytest`, `nvidia-smi`, ...) write
  nothing the gate cares about;
- writers name their targets (`cp A B` writes B, `sed -i` its files, `git checkout -- F` writes F,
  `git reset --hard` the whole tree);
- wrappers (`env`, `timeout`, `nice`, `sudo`, `xargs`, `find -exec`, `uv run`, ...) are unwrapped and
  the command inside is analysed; shells (`bash -c`, `bash FILE`, `eval`, `source`) are parsed again;
- everything else, including any program not listed here, is a write to an unknown place.

Running programs (`python train.py`, `pytest`, `make`) is allowed even though a program can write
files itself: the gate cannot see inside programs, and the protocol detects changed files when a
fix is verified. Inline code (`python -c`, `perl -e`, code on stdin) is treated as a write.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trainsleuth.clients.shell import Analysis, Command, Cwds, Outcome, Word

Rule = Callable[[Analysis, Command, str, list[Word]], "Outcome | None"]

# Programs that read, report or run without writing files of the workspace themselves.
READERS = frozenset(
    ["cat", "less", "more", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "ag", "ack", "ls", "ll", "la", "dir", "tree", "file", "stat", "du", "df", "free", "uptime", "ps", "top", "htop", "btop", "pgrep", "pidof", "lsof", "nvidia-smi", "nvtop", "gpustat", "rocm-smi", "nvcc", "which", "whereis", "type", "echo", "printf", "true", "false", "test", "[", "[[", ":", "pwd", "date", "cal", "printenv", "id", "whoami", "groups", "hostname", "uname", "basename", "dirname", "realpath", "readlink", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "sum", "diff", "diff3", "cmp", "comm", "cut", "paste", "join", "tr", "column", "nl", "fold", "fmt", "expand", "unexpand", "rev", "tac", "od", "hexdump", "strings", "jq", "zcat", "bzcat", "xzcat", "zless", "zgrep", "zdiff", "bzgrep", "xzgrep", "lz4cat", "zstdcat", "sleep", "wait", "seq", "yes", "man", "info", "help", "history", "jobs", "fg", "bg", "exit", "return", "break", "continue", "shift", "read", "getopts", "let", "nproc", "lscpu", "lspci", "lsusb", "lsblk", "lsmod", "ip", "ifconfig", "ping", "netstat", "ss", "dig", "nslookup", "host", "kill", "killall", "pkill", "trap-list", "times", "ulimit", "umask", "locale", "iconv", "numfmt", "factor", "expr", "bc", "dc", "shuf", "look", "tsort", "ldd", "nm", "objdump", "readelf", "size", "c++filt", "getconf", "sysctl-list", "vmstat", "iostat", "mpstat", "sar", "dmesg", "journalctl", "w", "who", "last", "env-list", "pip-list", "whatis", "apropos", "tty", "stty", "clear", "reset-term", "tput", "sync", "colordiff", "icdiff", "delta", "bat", "batcat", "glow", "highlight", "pygmentize", "mdcat", "csvlook", "csvstat", "csvcut", "csvgrep", "xsv", "qsv", "mlr-read", "duckdb-read", "nvidia-debugdump", "dcgmi", "ibstat", "ibv_devinfo", "fi_info", "ompi_info", "watchman-list", "tensorboard", "pytest", "py.test", "tox", "nox", "make", "cmake", "ninja", "ctest", "torchrun", "accelerate", "deepspeed", "mpirun", "mpiexec", "horovodrun", "composer", "mypy", "pylint", "flake8", "pyright", "pyflakes", "pycodestyle", "bandit", "vulture"]
)

# Variables that make the next program run something else (or be found elsewhere).
RISKY_VARIABLES = frozenset(
    ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH", "PATH", "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "IFS", "GIT_DIR", "GIT_WORK_TREE", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL", "GIT_ASKPASS", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PERL5OPT", "PERL5LIB", "RUBYOPT", "NODE_OPTIONS"]
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


# ------------------------------------------------------------------------------------- options


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


# ------------------------------------------------------------------------------------- the dispatcher


_PYTHON = re.compile(r"^(python|pypy|ipython)([0-9.]*)(-dbg)?$")
_PIP = re.compile(r"^pip([0-9.]*)$")


def analyse_command(an: Analysis, cmd: Command) -> Outcome:
    name = cmd.words[0]
    args = cmd.words[1:]
    if name.text is None or name.glob:
        an.unknown(f"the program `{name.source}` is only known when the command runs")
        return _same(cmd)
    prog = os.path.basename(name.text)
    if prog.lower().endswith(".exe"):
        prog = prog[:-4]
    rule = RULES.get(prog)
    if rule is None:
        if _PYTHON.match(prog):
            rule = python_rule
        elif _PIP.match(prog):
            rule = pip_rule
    if rule is not None:
        return rule(an, cmd, prog, args) or _same(cmd)
    if prog in READERS:
        return _same(cmd)
    if "/" in name.text:
        return local_program(an, cmd, name, args)
    an.unknown(f"the gate does not know whether `{prog}` writes files")
    return _same(cmd)


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
    opts, rest = split_command(args, "a")
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


def runner_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    """`uv run`, `poetry run`, `conda run`, `pipenv run`, `pdm run`, `hatch run`, `pixi run`, `uvx`."""
    words = args
    if prog == "uvx":
        _, rest = split_command(words, "wp", ("--with", "--python", "--from", "--index", "--directory"))
        return _run(an, cmd, rest)
    if prog == "uv":
        return uv_rule(an, cmd, prog, args)
    if prog in ("conda", "mamba", "micromamba"):
        return conda_rule(an, cmd, prog, args)
    if not words or words[0].text != "run":
        if prog in ("poetry", "pipenv", "pdm", "hatch", "pixi", "rye"):
            return package_manager(an, cmd, prog, words)
        an.unknown(f"the gate does not know whether `{prog}` writes files")
        return _same(cmd)
    _, rest = split_command(words[1:], "e", ("--env", "--environment", "--manifest-path"))
    return _run(an, cmd, rest)


# ------------------------------------------------------------------------------------- writers


def all_operands(with_value: str = "", long_with_value: Iterable[str] = (), skip_first: bool = False) -> Rule:
    """rm, touch, mkdir, truncate, chmod (MODE first), ...: every operand is written."""
    long_values = tuple(long_with_value)

    def rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
        parsed = parse(args, with_value, long_values)
        operands = parsed.operands
        if skip_first and not any(n == "--reference" for n, _ in parsed.options):
            operands = operands[1:]
        if not operands:
            an.unknown(f"`{prog}` without a file operand")
        for w in operands:
            an.write(w, f"`{prog}`", cmd.cwds)
        return None

    return rule


def _into(dest: Word, source: Word) -> Word:
    """DEST/basename(SOURCE): where `cp SOURCE DEST` writes when DEST is a folder."""
    if dest.text is None:
        return dest
    if source.text is None:
        return Word(dest.text.rstrip("/") + "/*", True, dest.source)
    return Word(
        os.path.join(dest.text, os.path.basename(source.text.rstrip("/"))),
        dest.glob or source.glob,
        dest.source,
    )


def copy_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    """cp, mv, install, ln, rsync, scp, link: the destination (and, for mv, the sources)."""
    value_opts = {
        "cp": ("tSZ", ("--target-directory", "--suffix", "--backup", "--context", "--sparse", "--reflink")),
        "mv": ("tS", ("--target-directory", "--suffix", "--backup", "--context")),
        "install": ("tSgmoZ", ("--target-directory", "--suffix", "--group", "--mode", "--owner", "--context",
                               "--strip-program")),
        "ln": ("tS", ("--target-directory", "--suffix", "--backup")),
        "rsync": ("efBT", ("--rsh", "--filter", "--exclude", "--include", "--exclude-from", "--include-from",
                           "--files-from", "--temp-dir", "--partial-dir", "--backup-dir", "--suffix",
                           "--compare-dest", "--copy-dest", "--link-dest", "--log-file", "--chmod",
                           "--rsync-path", "--out-format", "--timeout", "--bwlimit", "--max-size",
                           "--min-size")),
        "scp": ("cFiJloPS", ()),
        "link": ("", ()),
    }[prog]  # fmt: skip
    parsed = parse(args, value_opts[0], value_opts[1])
    operands = parsed.operands
    why = f"`{prog}`"
    if prog in ("rsync", "scp") and any(w.text is None or re.match(r"^[^/]*:", w.text) for w in operands):
        an.unknown(f"{why} with a remote or unknown path")
        return None
    if prog == "rsync" and parsed.has("--log-file"):
        an.write(parsed.value("--log-file"), why, cmd.cwds)
    target_dir = parsed.value("-t", "--target-directory")
    if target_dir is not None or parsed.has("-t", "--target-directory"):
        sources = operands
        dests = [_into(target_dir, s) for s in sources] if target_dir is not None else [None]
    elif prog == "install" and parsed.has("-d", "--directory"):
        sources, dests = [], list(operands)
    elif len(operands) >= 2:
        sources, dest = operands[:-1], operands[-1]
        # DEST may be a folder (then each source lands inside it) or a file name: both are written.
        dests = [dest, *(_into(dest, s) for s in sources)]
    elif len(operands) == 1 and prog in ("ln", "rsync", "scp"):
        sources, dests = operands, [_into(Word.literal("."), operands[0])]
    else:
        an.unknown(f"{why} with an unexpected set of operands")
        return None
    for d in dests:
        an.write(d, why, cmd.cwds)
    if prog == "mv" or (prog == "rsync" and parsed.has("--remove-source-files")):
        for s in sources:
            an.write(s, f"{why} (removes the source)", cmd.cwds)
    makes_links = (
        prog in ("ln", "link")
        or (prog in ("cp",) and parsed.has("-s", "-l", "--symbolic-link", "--link"))
        or (prog == "rsync" and parsed.has("--link-dest"))
    )
    if makes_links:
        # A link makes later writes through it land on its source: the source counts as written.
        for s in sources:
            an.write(s, f"{why} (links to it, so writes through the link change it)", cmd.cwds)
            if s.text is not None and not os.path.isabs(s.text):
                for d in dests[:1]:
                    if d is not None and d.text is not None:
                        relative_to_link = os.path.join(os.path.dirname(d.text), s.text)
                        an.write(Word(relative_to_link, s.glob, s.source), f"{why} (link target)", cmd.cwds)
    return None


def tee_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    for w in parse(args, "", ("--output-error",)).operands:
        an.write(w, "`tee`", cmd.cwds)
    return None


def dd_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    for w in args:
        if w.text is None:
            an.unknown("`dd` with an operand only known when it runs")
        elif w.text.startswith("of="):
            an.write(Word(w.text[3:], w.glob, w.source), "`dd of=`", cmd.cwds)
    return None


def truncate_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    return all_operands("sr", ("--size", "--reference"))(an, cmd, prog, args)


_SED_SIMPLE = set("pdnNqQl=gGhHxDPzF#")


def sed_script_writes(script: str) -> str | None:
    """Why a sed script writes or runs something (`w`, `W`, `e`, `s///w`, `s///e`), else None."""
    i, n = 0, len(script)

    def skip_to_end_of_command(j: int) -> int:
        while j < n and script[j] not in ";\n}":
            j += 1
        return j

    while i < n:
        c = script[i]
        if c in " \t\n;{}!":
            i += 1
            continue
        if c.isdigit() or c in "$,~+":
            i += 1
            continue
        if c in "/\\":  # an address /re/ or \cREc
            delim = "/"
            if c == "\\":
                if i + 1 >= n:
                    return "an unfinished sed address"
                delim = script[i + 1]
                i += 1
            i += 1
            while i < n and script[i] != delim:
                i += 2 if script[i] == "\\" else 1
            i += 1
            while i < n and script[i] in "IM":
                i += 1
            continue
        if c in "sy":
            if i + 1 >= n:
                return "an unfinished sed command"
            delim = script[i + 1]
            i += 2
            for _ in range(2):
                while i < n and script[i] != delim:
                    i += 2 if script[i] == "\\" else 1
                i += 1
            flags_start = i
            i = skip_to_end_of_command(i)
            if c == "s" and re.search(r"[we]", script[flags_start:i]):
                return "a sed `s` command with the w or e flag"
            continue
        if c in "wWe":
            return f"the sed `{c}` command"
        if c in "rRaicbtT:":
            i = script.find("\n", i)
            if c in "btT:":
                j = skip_to_end_of_command(i if i >= 0 else n)
                i = j
            if i < 0:
                break
            continue
        if c in _SED_SIMPLE or c == "v":
            i += 1
            continue
        return f"a sed command `{c}` the gate does not know"
    return None


def sed_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "efl", ("--expression", "--file", "--line-length"))
    scripts = parsed.values("-e", "--expression")
    files = parsed.values("-f", "--file")
    operands = list(parsed.operands)
    if not scripts and not files:
        if not operands:
            return None
        scripts = [operands.pop(0)]
    for f in files:
        an.unknown("`sed -f` runs a script file the gate does not read")
        del f
    for s in scripts:
        if s is None or s.text is None:
            an.unknown("a sed script only known when it runs")
            continue
        why = sed_script_writes(s.text)
        if why:
            an.unknown(why)
    in_place = any(n.startswith("--in-place") or n == "-i" for n, _ in parsed.options)
    if in_place:
        if not operands:
            an.unknown("`sed -i` without a file operand")
        for w in operands:
            an.write(w, "`sed -i`", cmd.cwds)
    return None


_AWK_WRITES = re.compile(r"system\s*\(|\|\s*getline|\b(print|printf)\b[^;}\n]*[>|]|\bclose\s*\(")


def awk_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "fvFiE", ("--file", "--assign", "--field-separator", "--include", "--exec"))
    if parsed.has("-i", "--include", "-f", "--file", "-E", "--exec"):
        an.unknown(f"`{prog}` with a program file or library the gate does not read")
        return None
    if not parsed.operands:
        return None
    program = parsed.operands[0]
    if program.text is None:
        an.unknown(f"an {prog} program only known when it runs")
    elif _AWK_WRITES.search(program.text):
        an.unknown(f"the {prog} program writes to a file or runs a command")
    return None


def perl_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "eEIMmlx0C", ())
    in_place = any(n == "-i" or n.startswith("-i") for n, _ in parsed.options)
    inline = parsed.has("-e", "-E")
    operands = parsed.operands if inline else parsed.operands[1:]
    if in_place:
        for w in operands:
            an.write(w, f"`{prog} -i`", cmd.cwds)
        if not operands:
            an.unknown(f"`{prog} -i` without a file operand")
    elif inline:
        an.unknown(f"`{prog} -e` runs inline code the gate cannot inspect")
    elif not parsed.operands:
        an.unknown(f"`{prog}` reads its program from stdin")
    return None


def inline_code_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    """ruby/node/Rscript/php/lua/osascript/deno/bun: inline code or stdin is a write; a script runs."""
    flags = {"ruby": "-e", "node": "-e", "nodejs": "-e", "Rscript": "-e", "php": "-r", "lua": "-e",
             "osascript": "-e", "deno": "eval", "bun": "-e", "julia": "-e", "R": "-e"}  # fmt: skip
    flag = flags.get(prog, "-e")
    texts = [a.text for a in args]
    if flag in texts or "--eval" in texts or "-p" in texts or "--print" in texts or not args:
        an.unknown(f"`{prog} {flag}` runs inline code the gate cannot inspect")
    return None


def python_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    """Running a script or module is allowed; inline code (`-c`, stdin) counts as a write."""
    i = 0
    while i < len(args):
        w = args[i]
        t = w.text
        if t is None:
            an.unknown(f"`{prog}` with an argument only known when it runs")
            return _same(cmd)
        if t == "-" or not t.startswith("-"):
            break
        if t in ("--version", "-V", "-VV", "--help", "-h", "--help-all", "--help-env", "--help-xoptions"):
            return _same(cmd)
        if t.startswith("--"):
            i += 2 if t in ("--check-hash-based-pycs",) else 1
            continue
        cluster = t[1:]
        if "c" in cluster.split("W")[0].split("X")[0]:
            an.unknown(f"`{prog} -c` runs inline code the gate cannot inspect")
            return _same(cmd)
        if "m" in cluster:
            rest = cluster[cluster.index("m") + 1 :]
            module = Word.literal(rest) if rest else (args[i + 1] if i + 1 < len(args) else None)
            tail = args[i + 1 :] if rest else args[i + 2 :]
            return python_module(an, cmd, prog, module, tail)
        if cluster[-1:] in ("W", "X"):
            i += 2
            continue
        i += 1
    script = args[i] if i < len(args) else None
    if script is None or script.text in ("-", "/dev/stdin") or script.text is None:
        if script is None and cmd.stdin_file is not None:
            return _same(cmd)  # `python < script.py` runs that script
        an.unknown(f"`{prog}` reads code from stdin or an unknown file, which the gate cannot inspect")
        return _same(cmd)
    return _same(cmd)


# Modules run with `python -m` that write files; each maps to the command-line program it is.
_MODULE_AS_PROGRAM = {
    "pip": "pip", "black": "black", "isort": "isort", "autopep8": "autopep8", "yapf": "yapf",
    "ruff": "ruff", "pre_commit": "pre-commit", "json.tool": "json.tool", "cProfile": "cProfile",
    "profile": "cProfile", "py_compile": "py_compile", "compileall": "py_compile", "venv": "venv",
    "virtualenv": "venv", "ensurepip": "pip", "zipfile": "zipfile", "tarfile": "zipfile",
    "trainsleuth": "trainsleuth", "uv": "uv", "conda": "conda", "pyupgrade": "pyupgrade",
    "lib2to3": "2to3", "nbconvert": "jupyter-nbconvert", "jupyter": "jupyter", "jupytext": "jupytext",
    "papermill": "papermill", "torch.utils.bottleneck": "", "pdb": "",
}  # fmt: skip


def python_module(an: Analysis, cmd: Command, prog: str, module: Word | None, args: list[Word]) -> Outcome:
    if module is None or module.text is None:
        an.unknown(f"`{prog} -m` of a module only known when it runs")
        return _same(cmd)
    program = _MODULE_AS_PROGRAM.get(module.text)
    if program:
        return _run(an, cmd, [Word.literal(program), *args])
    return _same(cmd)  # running a module, like running a script


def module_writer_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    """The writing stdlib modules: json.tool OUT, cProfile -o, py_compile, venv, zipfile -e."""
    if prog == "json.tool":
        operands = parse(args, "", ("--indent",)).operands
        if len(operands) >= 2:
            an.write(operands[1], "`python -m json.tool` output file", cmd.cwds)
    elif prog == "cProfile":
        parsed = parse(args[:2], "os", ("--outfile", "--sort"))
        out = parsed.value("-o", "--outfile")
        if out is not None:
            an.write(out, "`python -m cProfile -o`", cmd.cwds)
    elif prog == "py_compile":
        an.unknown("compiling to .pyc files (Python loads them instead of the source)")
    elif prog == "venv":
        for w in parse(args, "", ("--prompt",)).operands:
            an.write(
                Word(w.text, True, w.source)
                if w.text is None
                else Word(w.text.rstrip("/") + "/*", True, w.source),
                "creating a virtual environment",
                cmd.cwds,
            )
    elif prog == "zipfile":
        if any(a.text in ("-e", "--extract") for a in args):
            an.unknown("extracting an archive")
    return None


def pip_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "", ())
    sub = parsed.operands[0].text if parsed.operands else None
    reads = {"list", "show", "freeze", "check", "help", "inspect", "debug", "index", "search", "hash", None}
    if sub in reads:
        return None
    if (
        sub in ("cache", "config")
        and len(parsed.operands) > 1
        and parsed.operands[1].text in ("list", "info", "dir", "get", "debug")
    ):
        return None
    an.unknown(f"`pip {sub}` changes the Python environment the reproducer runs in")
    return None


def package_manager(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    parsed = parse(args, "", ())
    sub = parsed.operands[0].text if parsed.operands else None
    reads = {"list", "show", "info", "search", "check", "help", "--version", "version", "tree", "outdated",
             "why", "env-list", "config-list", "ls", "view", None}  # fmt: skip
    if sub in reads or parsed.has("--version", "-V", "--help", "-h"):
        return _same(cmd)
    an.unknown(f"`{prog} {sub}` changes the environment or files of the project")
    return _same(cmd)


def uv_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    opts, rest = split_command(
        args, "p", ("--python", "--directory", "--project", "--cache-dir", "--config-file")
    )
    if not rest:
        return _same(cmd)
    sub, tail = rest[0].text, rest[1:]
    cwds = _in_dir(cmd.cwds, opts.value("--directory")) if opts.has("--directory") else cmd.cwds
    if sub == "run":
        ropts, command = split_command(
            tail, "wp", ("--with", "--python", "--directory", "--project", "--extra", "--group", "--env-file",
                         "--with-requirements", "--package", "--index", "--script"),
        )  # fmt: skip
        if ropts.has("--directory"):
            cwds = _in_dir(cwds, ropts.value("--directory"))
        if not command:
            return _same(cmd)
        an.command(Command(command, cwds, cmd.depth, cmd.stdin, cmd.stdin_file, cmd.stdin_dynamic))
        return _same(cmd)
    if sub == "pip":
        return pip_rule(an, cmd, "pip", tail) or _same(cmd)
    if sub == "tool" and tail and tail[0].text == "run":
        return runner_rule(an, cmd, "uvx", tail[1:])
    return package_manager(an, cmd, "uv", rest)


def conda_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome:
    parsed = parse(args, "npc", ("--name", "--prefix", "--cwd"), posix=True)
    sub = parsed.operands[0].text if parsed.operands else None
    if sub == "run":
        _, command = split_command(parsed.operands[1:], "npc", ("--name", "--prefix", "--cwd"))
        return _run(an, cmd, command)
    if sub == "env" and len(parsed.operands) > 1 and parsed.operands[1].text in ("list",):
        return _same(cmd)
    if sub in ("activate", "deactivate"):
        return _same(cmd)
    return package_manager(an, cmd, prog, parsed.operands)


def formatter_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    """black/isort/ruff/autopep8/yapf/...: write their file operands unless only checking."""
    texts = {a.text for a in args}
    if prog == "ruff":
        sub = next((a.text for a in args if a.text and not a.text.startswith("-")), None)
        if (sub == "format" and not texts & {"--check", "--diff"}) or (sub == "check" and texts & {"--fix", "--unsafe-fixes", "--fix-only"}):
            pass
        else:
            return None
        args = [a for a in args if a.text != sub]
    elif prog in ("autopep8", "yapf", "docformatter", "clang-format"):
        if not texts & {"-i", "--in-place"}:
            return None
    elif prog == "prettier":
        if not texts & {"--write", "-w"}:
            return None
    elif prog == "eslint":
        if "--fix" not in texts:
            return None
    elif prog == "2to3":
        if not texts & {"-w", "--write"}:
            return None
    elif texts & {"--check", "--diff", "--check-only", "-c"}:
        return None
    operands = parse(args, "", ("--config", "--line-length", "--settings-path", "--target-version")).operands
    if not operands:
        an.unknown(f"`{prog}` rewrites files")
    for w in operands:
        target = Word(w.text.rstrip("/") + "/*", True, w.source) if w.text in (".", "./") else w
        an.write(target, f"`{prog}` rewrites files", cmd.cwds)
    return None


def editor_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    operands = [a for a in args if not (a.text or "x").startswith(("-", "+"))]
    if not operands:
        an.unknown(f"the editor `{prog}`")
    for w in operands:
        an.write(w, f"the editor `{prog}`", cmd.cwds)
    return None


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


def find_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    roots: list[Word] = []
    i = 0
    while i < len(args) and args[i].text in ("-H", "-L", "-P", "-O0", "-O1", "-O2", "-O3", "-D"):
        i += 2 if args[i].text == "-D" else 1
    while (
        i < len(args)
        and not (args[i].text or "").startswith(("-", "(", "!", ")"))
        and args[i].text is not None
    ):
        roots.append(args[i])
        i += 1
    roots = roots or [Word.literal(".")]
    inside = [Word(None if r.text is None else r.text.rstrip("/") + "/*", True, r.source) for r in roots]
    while i < len(args):
        t = args[i].text
        if t is None:
            i += 1
            continue
        if t == "-delete":
            for w in inside:
                an.write(w, "`find -delete`", cmd.cwds)
        elif t in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            an.write(args[i + 1] if i + 1 < len(args) else None, f"`find {t}`", cmd.cwds)
        elif t in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            words: list[Word] = []
            while j < len(args) and args[j].text not in (";", "+"):
                words.append(args[j])
                j += 1
            for place in inside:
                subst = [
                    Word(place.text, True, "{}") if (w.text is not None and "{}" in w.text) else w
                    for w in words
                ]
                if subst:
                    sub_cwds = frozenset({None}) if t in ("-execdir", "-okdir") else cmd.cwds
                    an.command(Command(subst, sub_cwds if t.endswith("dir") else cmd.cwds, cmd.depth))
            i = j
        i += 1
    return None


def output_option_rule(short: str, long: Iterable[str], default_write: bool = False) -> Rule:
    """Readers that write only with an output option (sort -o, curl -o, wget -O, ...)."""
    long_names = tuple(long)

    def rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
        parsed = parse(args, short, long_names)
        found = False
        for name, value in parsed.options:
            if name.lstrip("-") in short or name in long_names:
                if value is not None and value.text == "-":
                    found = True
                    continue
                an.write(value, f"`{prog} {name}`", cmd.cwds)
                found = True
        if prog == "curl" and parsed.has("-O", "--remote-name", "--remote-name-all", "-J"):
            an.unknown("`curl -O` writes a file named after the URL")
        if default_write and not found:
            an.unknown(f"`{prog}` writes a file named after its input")
        return None

    return rule


def uniq_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    operands = parse(
        args, "fsw", ("--skip-fields", "--skip-chars", "--check-chars", "--group", "--all-repeated")
    ).operands
    if len(operands) >= 2:
        an.write(operands[1], "`uniq` output file", cmd.cwds)
    return None


def archive_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    if prog == "tar":
        first = args[0].text if args else ""
        flags = (first or "").lstrip("-") if first and not first.startswith("--") else ""
        texts = {a.text for a in args}
        listing = "t" in flags or "--list" in texts
        creating = "c" in flags or "--create" in texts or "r" in flags or "u" in flags or "--append" in texts
        if listing and not creating:
            return None
        if creating:
            parsed = parse(args[1:] if flags else args, "fCT", ("--file", "--directory", "--files-from"))
            target = parsed.value("-f", "--file")
            if "f" in flags and target is None:
                rest = [a for a in args[1:] if not (a.text or "x").startswith("-")]
                target = rest[0] if rest else None
            an.write(target, "`tar` archive", cmd.cwds)
            return None
        an.unknown("extracting an archive (it may hold links or paths anywhere)")
        return None
    if prog in ("unzip", "7z", "unrar", "cpio", "bsdtar"):
        if any(a.text in ("-l", "l", "-t", "t", "-v", "-Z") for a in args):
            return None
        an.unknown("extracting an archive (it may hold links or paths anywhere)")
        return None
    if prog == "zip":
        operands = parse(args, "bnt", ()).operands
        an.write(operands[0] if operands else None, "`zip` archive", cmd.cwds)
        return None
    # gzip, gunzip, bzip2, xz, zstd, lz4: replace each file unless writing to stdout or listing.
    texts = {a.text for a in args}
    if texts & {"-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test"}:
        return None
    operands = parse(args, "S", ("--suffix",)).operands
    for w in operands:
        an.write(w, f"`{prog}` replaces the file", cmd.cwds)
        an.write(Word(None if w.text is None else w.text + "*", True, w.source), f"`{prog}` output", cmd.cwds)
    return None


def patch_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    texts = {a.text for a in args}
    if texts & {"--dry-run", "-C", "--check"} and prog == "patch":
        return None
    parsed = parse(args, "oipdBDFrVYzg", ("--output", "--input", "--strip", "--directory", "--reject-file"))
    out = parsed.value("-o", "--output")
    if out is not None:
        an.write(out, "`patch -o`", cmd.cwds)
    else:
        an.unknown("`patch` writes the files named in the patch")
    return None


def sqlite_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "", ("-cmd", "-separator", "-nullvalue", "-newline", "-init"))
    operands = parsed.operands
    readonly = any(n in ("-readonly", "--readonly", "-r") for n, _ in parsed.options) or parsed.has(
        "-readonly"
    )
    sql = " ".join(w.text or "$?" for w in operands[1:])
    if re.search(
        r"^\s*\.(shell|system|output|once|save|backup|import|open|excel|load)\b|\battach\b|\bvacuum\s+into\b",
        sql,
        re.I | re.M,
    ):
        an.unknown(f"`{prog}` with a command that writes files or runs programs")
    if not readonly or not operands:
        an.write(operands[0] if operands else None, f"`{prog}` (may change the database)", cmd.cwds)
    return None


_GIT_READS = frozenset(
    ["log", "show", "diff", "status", "blame", "annotate", "shortlog", "describe", "rev-parse", "rev-list", "ls-files", "ls-tree", "ls-remote", "cat-file", "grep", "show-ref", "for-each-ref", "merge-base", "name-rev", "whatchanged", "count-objects", "version", "help", "var", "check-ignore", "check-attr", "check-ref-format", "check-mailmap", "diff-tree", "diff-files", "diff-index", "range-diff", "cherry", "verify-commit", "verify-tag", "fsck", "show-branch", "fetch", "get-tar-commit-id", "--version", "--help"]
)
_GIT_LIST_ONLY = {
    "branch": {"-a", "-r", "-l", "--list", "-v", "-vv", "--all", "--remotes", "--show-current", "--contains",
               "--merged", "--no-merged", "--points-at", "--column", "--no-column", "--color", "--no-color",
               "--verbose", "--sort", "--format", "--abbrev", "--no-abbrev", "-i", "--ignore-case"},
    "tag": {"-l", "--list", "-n", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at",
            "--sort", "--format", "--column", "-i", "--ignore-case", "--color"},
    "remote": {"-v", "--verbose", "show", "get-url"},
    "stash": {"list", "show"},
    "config": {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list", "--show-origin",
               "--show-scope", "--name-only", "--global", "--local", "--system", "get", "list", "-z", "--null",
               "--type", "--bool", "--int", "--path", "--default", "--includes", "--no-includes", "-f", "--file"},
    "worktree": {"list"},
    "bisect": {"log", "visualize", "view"},
    "submodule": {"status", "summary"},
    "notes": {"list", "show"},
    "reflog": {"show"},
    "sparse-checkout": {"list"},
    "lfs": {"ls-files", "status", "env", "version"},
}  # fmt: skip
_GIT_SAFE_CONFIG = re.compile(r"^(color\.[\w.]+|core\.quotepath|log\.\w+|i18n\.\w+|column\.\w+|advice\.\w+|"
                              r"safe\.directory|diff\.(renames|noprefix|mnemonicprefix|context)|"
                              r"status\.\w+|grep\.\w+|pager\.\w+=(false|true))=")  # fmt: skip


def git_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    cwds = cmd.cwds
    other_tree = False
    i = 0
    while i < len(args):
        t = args[i].text
        if t is None:
            an.unknown("`git` with an argument only known when it runs")
            return None
        if not t.startswith("-"):
            break
        if t == "-C":
            cwds = _in_dir(cwds, args[i + 1] if i + 1 < len(args) else None)
            i += 2
            continue
        if t == "-c":
            value = args[i + 1] if i + 1 < len(args) else None
            if value is None or value.text is None or not _GIT_SAFE_CONFIG.match(value.text):
                an.unknown("`git -c` can make git run other programs")
            i += 2
            continue
        if t.startswith(("--git-dir", "--work-tree", "--namespace")):
            other_tree = True
        elif t.startswith(("--exec-path=", "--config-env", "--super-prefix")):
            an.unknown(f"`git {t.split('=')[0]}` can make git run other programs")
        i += 1 if "=" in t or t not in ("--git-dir", "--work-tree", "--namespace", "--config-env") else 2
    if i >= len(args):
        return None
    sub = args[i].text or ""
    rest = args[i + 1 :]
    texts = [a.text for a in rest]
    why = f"`git {sub}`"
    for j, a in enumerate(rest):
        if a.text is not None and a.text.startswith("--output="):
            an.write(Word(a.text[9:], a.glob, a.source), f"{why} --output", cwds)
        elif a.text == "--output" and j + 1 < len(rest):
            an.write(rest[j + 1], f"{why} --output", cwds)
    if sub in _GIT_READS:
        if sub == "grep" and any(
            t in ("-O", "--open-files-in-pager") or (t or "").startswith("-O") for t in texts
        ):
            an.unknown("`git grep -O` runs a program")
        if sub == "diff" and any(t in ("--ext-diff",) for t in texts):
            an.unknown("`git diff --ext-diff` runs a program")
        return None
    if sub in _GIT_LIST_ONLY and _git_lists_only(sub, [t for t in texts if t is not None]):
        return None
    if sub in ("checkout", "restore", "rm", "mv") and not other_tree:
        return _git_paths(an, sub, rest, cwds)
    if sub == "add" and not other_tree:
        return None  # stages content in the index; no file in the tree changes
    if sub == "apply" and all(
        (t or "").startswith("--") or t in ("-v",) for t in texts if t and t.startswith("-")
    ):
        if (
            any(t in ("--check", "--stat", "--numstat", "--summary") for t in texts)
            and "--apply" not in texts
        ):
            return None
    if sub == "clean" and any(
        t and t.startswith("-") and not t.startswith("--") and ("x" in t or "X" in t) for t in texts
    ):
        an.write(Word.literal(".trainsleuth/state.db"), "`git clean -x` (removes ignored files)", cwds)
    if sub in ("archive", "format-patch", "bundle"):
        parsed = parse(rest, "o", ("--output", "--output-directory"))
        out = parsed.value("-o", "--output", "--output-directory")
        if out is not None:
            target = (
                out
                if sub == "archive"
                else Word(None if out.text is None else out.text.rstrip("/") + "/*", True, out.source)
            )
            an.write(target, why, cwds)
            return None
    for cwd in cwds if not other_tree else [None]:
        an.write(
            Word.literal("*") if cwd is not None else None,
            f"{why} changes files of the working tree",
            frozenset({cwd}),
        )
    return None


_GIT_LISTING_FLAGS = {"-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"}
_GIT_CONFIG_READS = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list", "get", "list"}


def _git_lists_only(sub: str, texts: list[str]) -> bool:
    """`git branch`, `git tag -l`, `git config --get`, `git stash list`, ...: listing, not changing."""
    allowed = _GIT_LIST_ONLY[sub]
    flags = [t.split("=", 1)[0] for t in texts if t.startswith("-")]
    positional = [t for t in texts if not t.startswith("-")]
    if sub in ("branch", "tag"):
        if not all(f in allowed or (sub == "tag" and f.startswith("-n")) for f in flags):
            return False
        return not positional or bool(set(flags) & _GIT_LISTING_FLAGS)
    if sub == "config":
        if not all(f in allowed for f in flags):
            return False
        return bool(set(texts) & _GIT_CONFIG_READS) or len(positional) <= 1
    if sub in ("remote", "reflog") and not texts:
        return True
    return (
        bool(texts)
        and texts[0] in allowed
        and all(f in allowed or f in ("-p", "--stat", "-v", "--oneline") for f in flags[:0])
    )


def _git_paths(an: Analysis, sub: str, rest: list[Word], cwds: Cwds) -> Outcome | None:
    """checkout/restore/rm/mv: the paths they write, or the whole tree when not known."""
    why = f"`git {sub}`"
    parsed = parse(
        rest,
        "sbBpUm" if sub in ("checkout", "restore") else "",
        ("--source", "--conflict", "--pathspec-from-file"),
    )
    if parsed.has("--pathspec-from-file"):
        an.write(None, why, cwds)
        return None
    texts = [a.text for a in rest]
    if "--" in texts:
        paths = rest[texts.index("--") + 1 :]
    elif sub == "checkout":
        operands = parsed.operands
        # `git checkout NAME` switches branches (the whole tree) unless every NAME is an existing path.
        existing = [w for w in operands[1:]] if len(operands) > 1 else []
        paths = existing if existing and all(_exists(an, w, cwds) for w in existing) else []
        if not paths:
            for cwd in cwds:
                an.write(
                    Word.literal("*") if cwd is not None else None,
                    f"{why} changes files of the working tree",
                    frozenset({cwd}),
                )
            return None
    else:
        paths = parsed.operands
    if not paths:
        an.write(None, why, cwds)
    for p in paths:
        if p.text is not None and p.text.startswith(":"):
            an.write(None, f"{why} with a pathspec", cwds)
        else:
            an.write(p, why, cwds)
    return None


def _exists(an: Analysis, word: Word, cwds: Cwds) -> bool:
    if word.text is None:
        return False
    return all(c is not None and os.path.exists(os.path.join(an.base, c, word.text)) for c in cwds)


def trainsleuth_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    """trainsleuth's own CLI: analysis commands run; a second server or protocol calls do not."""
    sub = args[0].text if args else None
    if sub in (None, "logs", "probe", "demo", "hook", "--help", "-h", "--version"):
        return None
    if sub == "client" and len(args) > 1 and args[1].text == "tools":
        return None
    if sub == "client" and len(args) > 2 and args[1].text == "call" and args[2].text in _ANALYSIS_TOOLS:
        return None
    an.unknown(f"`trainsleuth {sub}` changes configuration or talks to the protocol outside this session's "
               "MCP connection (use the MCP tools)")  # fmt: skip
    return None


_ANALYSIS_TOOLS = frozenset(
    ["get_investigation", "list_investigations", "probe_gradients", "read_probe_run", "compare_precision", "check_distributed", "dump_stacks", "analyze_training_log", "extract_metrics", "diff_checkpoints", "environment_report", "get_job", "search_literature", "lookup_constraints", "compare_runs", "check_resume"]
)


def docker_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    sub = next((a.text for a in args if a.text and not a.text.startswith("-")), None)
    if sub in ("ps", "images", "logs", "inspect", "version", "info", "stats", "top", "port", "history"):
        return None
    an.unknown(f"`{prog} {sub}` can change files through mounted folders")
    return None


def make_reader_of(*subcommands: str | None) -> Rule:
    """Programs whose listed subcommands only read; any other is an unknown write."""
    allowed = set(subcommands)

    def rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
        sub = next((a.text for a in args if a.text is not None and not a.text.startswith("-")), None)
        if sub in allowed:
            return None
        an.unknown(f"the gate does not know whether `{prog} {sub or ''}`".rstrip() + " writes files")
        return None

    return rule


def jupyter_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    sub = args[0].text if args else None
    if (
        sub in ("notebook", "lab", "server", "kernelspec", "--version", "--paths", "troubleshoot")
        and sub != "nbconvert"
    ):
        return None
    if prog == "jupyter-nbconvert" or sub == "nbconvert":
        if any(a.text == "--stdout" for a in args):
            return None
    an.unknown(f"`{prog} {sub or ''}` writes notebooks or their conversions".replace("  ", " "))
    return None


def mktemp_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "pt", ("--tmpdir", "--suffix"))
    folder = parsed.value("-p", "--tmpdir")
    template = parsed.operands[0] if parsed.operands else None
    if folder is not None:
        an.write(
            Word(None if folder.text is None else folder.text.rstrip("/") + "/*", True, folder.source),
            "`mktemp`",
            cmd.cwds,
        )
    elif template is not None and template.text is not None and "/" in template.text and not parsed.has("-t"):
        an.write(Word(template.text.replace("X", "?"), True, template.source), "`mktemp`", cmd.cwds)
    elif template is not None and template.text is None:
        an.unknown("`mktemp` with a template only known when it runs")
    return None


def wget_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(
        args, "OoaPe", ("--output-document", "--output-file", "--append-output", "--directory-prefix")
    )
    doc = parsed.value("-O", "--output-document")
    for name in ("-o", "--output-file", "-a", "--append-output"):
        if parsed.has(name):
            an.write(parsed.value(name), f"`wget {name}`", cmd.cwds)
    if doc is not None:
        if doc.text != "-":
            an.write(doc, "`wget -O`", cmd.cwds)
        return None
    if parsed.has("--spider"):
        return None
    prefix = parsed.value("-P", "--directory-prefix")
    folder = prefix.text if prefix is not None and prefix.text is not None else "."
    an.write(Word(folder.rstrip("/") + "/*", True, folder), "`wget` downloads into the folder", cmd.cwds)
    return None


RULES: dict[str, Rule] = {
    # shell builtins and keywords
    "cd": cd_rule, "pushd": cd_rule, "popd": cd_rule, "eval": eval_rule, "source": source_rule,
    ".": source_rule, "alias": alias_rule, "exec": exec_rule, "command": command_rule,
    "builtin": builtin_rule, "set": set_rule, "shopt": set_rule, "hash": hash_rule, "enable": enable_rule,
    "trap": trap_rule, "export": declare_rule, "declare": declare_rule, "typeset": declare_rule,
    "local": declare_rule, "readonly": declare_rule, "unset": set_rule, "unalias": set_rule,
    "mapfile": set_rule, "readarray": set_rule, "printf": set_rule, "echo": set_rule,
    # wrappers
    "env": env_rule, "sudo": sudo_rule, "doas": sudo_rule, "su": sudo_rule, "sudoedit": editor_rule,
    "nice": _wrapper("n", ("--adjustment",)), "nohup": _wrapper(), "time": _wrapper("fo", ("--format", "--output")),
    "timeout": timeout_rule, "ionice": _wrapper("cnpPu", ("--class", "--classdata", "--pid", "--pgid", "--uid")),
    "taskset": _wrapper("", (), positional=1), "chrt": _wrapper("T", (), positional=1),
    "stdbuf": _wrapper("ioe", ("--input", "--output", "--error")), "setsid": _wrapper(),
    "unbuffer": _wrapper(), "caffeinate": _wrapper("tw"), "xvfb-run": _wrapper("nsfeplw", ("--server-args", "--server-num", "--auth-file", "--error-file", "--xauth-protocol", "--wait")),
    "numactl": _wrapper("CcmNpPi", ("--cpunodebind", "--physcpubind", "--membind", "--preferred", "--interleave")),
    "xargs": xargs_rule, "watch": watch_rule, "flock": flock_rule, "catchsegv": _wrapper(),
    "strace": tracer_rule, "ltrace": tracer_rule, "valgrind": tracer_rule, "perf": tracer_rule,
    "nsys": tracer_rule, "ncu": tracer_rule, "py-spy": tracer_rule, "scalene": tracer_rule, "kernprof": tracer_rule,
    "srun": _wrapper("nNpcJAtwxCdDeGiLmoSU", ("--ntasks", "--nodes", "--partition", "--cpus-per-task", "--job-name",
                                               "--account", "--time", "--gres", "--mem", "--output", "--error",
                                               "--constraint", "--qos", "--chdir")),
    "uv": runner_rule, "uvx": runner_rule, "poetry": runner_rule, "pipenv": runner_rule, "pdm": runner_rule,
    "hatch": runner_rule, "pixi": runner_rule, "rye": runner_rule, "conda": runner_rule, "mamba": runner_rule,
    "micromamba": runner_rule,
    # shells and interpreters
    "bash": shell_rule, "sh": shell_rule, "dash": shell_rule, "zsh": shell_rule, "ksh": shell_rule,
    "fish": shell_rule, "busybox": shell_rule,
    "python": python_rule, "pip": pip_rule, "perl": perl_rule,
    "ruby": inline_code_rule, "node": inline_code_rule, "nodejs": inline_code_rule, "Rscript": inline_code_rule,
    "R": inline_code_rule, "php": inline_code_rule, "lua": inline_code_rule, "osascript": inline_code_rule,
    "deno": inline_code_rule, "bun": inline_code_rule, "julia": inline_code_rule,
    "awk": awk_rule, "gawk": awk_rule, "mawk": awk_rule, "nawk": awk_rule, "sed": sed_rule, "gsed": sed_rule,
    # writers
    "cp": copy_rule, "mv": copy_rule, "install": copy_rule, "ln": copy_rule, "link": copy_rule,
    "rsync": copy_rule, "scp": copy_rule, "tee": tee_rule, "dd": dd_rule, "truncate": truncate_rule,
    "rm": all_operands(), "rmdir": all_operands(), "unlink": all_operands(), "shred": all_operands("nsu", ("--iterations", "--size", "--random-source")),
    "touch": all_operands("drt", ("--date", "--reference", "--time")), "mkdir": all_operands("m", ("--mode", "--context")),
    "mkfifo": all_operands("m", ("--mode",)), "mknod": all_operands("m", ("--mode",)),
    "chmod": all_operands("", ("--reference",), skip_first=True), "chown": all_operands("", ("--reference", "--from"), skip_first=True),
    "chgrp": all_operands("", ("--reference",), skip_first=True), "chattr": all_operands("vp", (), skip_first=True),
    "setfacl": all_operands("mMxX", ("--modify", "--modify-file", "--remove", "--remove-file", "--set", "--set-file")),
    "split": all_operands("abCdlnt", ("--suffix-length", "--bytes", "--line-bytes", "--lines", "--number", "--additional-suffix", "--separator")),
    "csplit": output_option_rule("f", ("--prefix",), default_write=True),
    "sort": output_option_rule("o", ("--output",)), "uniq": uniq_rule,
    "curl": output_option_rule("oDc", ("--output", "--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr", "--etag-save", "--hsts", "--alt-svc")),
    "wget": wget_rule, "openssl": output_option_rule("", ("-out", "-keyout")), "xxd": output_option_rule("", ()),
    "base64": output_option_rule("", ()), "mktemp": mktemp_rule,
    "tar": archive_rule, "unzip": archive_rule, "zip": archive_rule, "7z": archive_rule, "unrar": archive_rule,
    "cpio": archive_rule, "bsdtar": archive_rule, "gzip": archive_rule, "gunzip": archive_rule,
    "bzip2": archive_rule, "bunzip2": archive_rule, "xz": archive_rule, "unxz": archive_rule,
    "zstd": archive_rule, "unzstd": archive_rule, "lz4": archive_rule,
    "patch": patch_rule, "sqlite3": sqlite_rule, "git": git_rule, "find": find_rule,
    "vi": editor_rule, "vim": editor_rule, "nvim": editor_rule, "nano": editor_rule, "emacs": editor_rule,
    "ed": editor_rule, "ex": editor_rule, "pico": editor_rule, "micro": editor_rule, "code": editor_rule,
    "subl": editor_rule, "gedit": editor_rule, "kate": editor_rule, "joe": editor_rule, "mcedit": editor_rule,
    "black": formatter_rule, "isort": formatter_rule, "ruff": formatter_rule, "autopep8": formatter_rule,
    "yapf": formatter_rule, "prettier": formatter_rule, "eslint": formatter_rule, "clang-format": formatter_rule,
    "2to3": formatter_rule, "pyupgrade": formatter_rule, "docformatter": formatter_rule,
    "json.tool": module_writer_rule, "cProfile": module_writer_rule, "py_compile": module_writer_rule,
    "venv": module_writer_rule, "virtualenv": module_writer_rule, "zipfile": module_writer_rule,
    "trainsleuth": trainsleuth_rule, "docker": docker_rule, "podman": docker_rule,
    "jupyter": jupyter_rule, "jupyter-nbconvert": jupyter_rule,
    "npm": make_reader_of("ls", "list", "view", "info", "test", "run", "--version", None),
    "apt": make_reader_of("list", "show", "search", "policy", None), "apt-get": make_reader_of(None),
    "apt-cache": make_reader_of("search", "show", "policy", "depends", "rdepends", "madison", None),
    "brew": make_reader_of("list", "info", "search", "config", "doctor", None),
    "pre-commit": make_reader_of(),
    "tmux": make_reader_of("ls", "list-sessions", "list-windows", "capture-pane"), "screen": make_reader_of("-ls", "-list"),
    "ssh": make_reader_of(), "systemctl": make_reader_of("status", "list-units", "is-active", "show"),
    "wandb": make_reader_of("status", "--version", None), "mlflow": make_reader_of("ui", "server", "--version"),
    "huggingface-cli": make_reader_of("env", "whoami", "scan-cache", None),
    "ffmpeg": make_reader_of(), "convert": make_reader_of(), "magick": make_reader_of(),
    "papermill": make_reader_of(), "jupytext": make_reader_of(), "pre_commit": make_reader_of(),
    "sysctl": make_reader_of(None), "mount": make_reader_of(None), "crontab": make_reader_of("-l"),
    "gdb": make_reader_of(), "lldb": make_reader_of(), "pdb": make_reader_of(), "ipdb": make_reader_of(),
}  # fmt: skip

# pip3, python3.11 etc. are matched by pattern; these two have their own rules too.
RULES["pip3"] = pip_rule
RULES["python3"] = python_rule
