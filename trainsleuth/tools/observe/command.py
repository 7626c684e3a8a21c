"""The user's own training command, as they type it, made ready to run under the observer.

`python train.py --config c.yaml`, `torchrun --nproc_per_node 2 train.py`, `accelerate launch ...`,
`python -m pkg.train`, `bash scripts/train.sh` and a shell line with `&&` or `VAR=1` prefixes are all
accepted. The command runs with the user's interpreter first on PATH (so `python`, `torchrun` and
`accelerate` are the environment's own), and a leading `python`/`python3` is that interpreter.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

SHELL_CHARS = re.compile(r"[|&;<>()$`\n*?~]|^\s*\w+=")
PYTHON_NAMES = re.compile(r"^python(\d+(\.\d+)?)?$")
MAX_COMMAND_CHARS = 8000


class CommandError(ValueError):
    """The command cannot be run as given; the message says why and what to give instead."""


@dataclass(frozen=True)
class ObservedCommand:
    argv: list[str]
    shell: bool  # run through bash -c
    text: str  # what the user gave, for reports
    launcher: str  # python | torchrun | accelerate | deepspeed | shell | program


def parse_command(command: str | list[str], *, python: Path) -> ObservedCommand:
    """Turn the user's command into argv; CommandError for an empty or unusable one."""
    if isinstance(command, list):
        if not command or not all(isinstance(a, str) for a in command):
            raise CommandError("command is empty: give the command you run, e.g. 'python train.py'")
        argv = list(command)
        text = shlex.join(argv)
        shell = False
    else:
        text = command.strip()
        if not text:
            raise CommandError("command is empty: give the command you run, e.g. 'python train.py'")
        if len(text) > MAX_COMMAND_CHARS:
            raise CommandError(f"command is {len(text)} characters; at most {MAX_COMMAND_CHARS}")
        if "\0" in text:
            raise CommandError("command contains a NUL character")
        shell = bool(SHELL_CHARS.search(text))
        if shell:
            argv = ["bash", "-c", text]
        else:
            try:
                argv = shlex.split(text)
            except ValueError as exc:
                raise CommandError(f"command cannot be split into words: {exc}") from None
    if not shell and PYTHON_NAMES.match(Path(argv[0]).name) and "/" not in argv[0]:
        argv[0] = str(python)
    return ObservedCommand(argv=argv, shell=shell, text=text, launcher=_launcher(argv, shell))


def _launcher(argv: list[str], shell: bool) -> str:
    words = argv[2].split() if shell and len(argv) > 2 else argv
    names = [Path(w).name for w in words]
    for i, name in enumerate(names):
        if name in ("torchrun", "srun"):
            return "torchrun" if name == "torchrun" or "torchrun" in names else "srun"
        if name == "accelerate":
            return "accelerate"
        if name == "deepspeed":
            return "deepspeed"
        if PYTHON_NAMES.match(name) and names[i + 1 : i + 3] == ["-m", "torch.distributed.run"]:
            return "torchrun"
    if shell:
        return "shell"
    if PYTHON_NAMES.match(names[0]) or argv[0].endswith(("/python", "/python3")):
        return "python"
    if names[0] in ("bash", "sh") or names[0].endswith(".sh"):
        return "shell"
    return "program"
