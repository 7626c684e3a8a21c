"""Interpreters, stream editors, package managers, formatters and editors.

Running a script or module is allowed (`python train.py`, `python -m pytest`); inline code
(`python -c`, code on stdin, `perl -e`, `node -e`) counts as a write because the gate cannot see
what it does. `sed`/`awk`/`perl -i` write the files they edit (a sed script with `w` or `e`, an
awk program with output redirection or `system()`, count too). Package managers that change the
environment (`pip install`, `conda install`, `uv sync`) count as writes: the reproducer runs there.
"""

from __future__ import annotations

import re

from trainsleuth.clients.gate.analysis import Analysis
from trainsleuth.clients.gate.model import Command, Outcome, Word
from trainsleuth.clients.gate.options import _in_dir, _run, _same, parse, split_command

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
    elif prog == "zipfile" and any(a.text in ("-e", "--extract") for a in args):
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
        if (sub == "format" and not texts & {"--check", "--diff"}) or (
            sub == "check" and texts & {"--fix", "--unsafe-fixes", "--fix-only"}
        ):
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
