"""Write a probe entrypoint for a training script (`trainsleuth probe --scaffold train.py`).

The written file lives in `WORKSPACE/.trainsleuth/scratch/` (git-ignored, writable at every
protocol phase). Its `make()` runs the script with its arguments until the first
`optimizer.step()` (`tools/runners/_ts_script.py`, in the user's interpreter) and hands the probe
the model, optimizer, scheduler, the batch the model last saw and the script's own loss. Nothing
is guessed: when the loss cannot be recomputed, probing the scaffold says so and shows the lines of
the script that build it, and `LOSS_FN` in the file is the one thing to write.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pydantic import BaseModel

from trainsleuth.state.store import ensure_state_dir
from trainsleuth.tools.probe.report import ProbeError
from trainsleuth.tools.runners.launch import RUNNERS_DIR

SCRATCH = Path(".trainsleuth") / "scratch"

TEMPLATE = '''"""Probe entrypoint scaffolded by trainsleuth from {rel}.

`make()` runs {rel} (arguments: ARGV) until its first optimizer.step(), stops it there before the
step is taken, and hands the probe the model, the optimizer (with its LR scheduler), the batch the
model last saw and the script's own loss. Make the run small through ARGV (batch size, model size,
no torch.compile). If the probe says it could not infer the loss, write LOSS_FN below.

    trainsleuth probe {entry}
"""

import sys

SCRIPT = {script!r}
ARGV = {argv!r}
RUNNERS = {runners!r}  # trainsleuth's probe helpers: torch and the standard library only


def loss_fn(model, batch):
    """The script's loss for one batch: batch["args"] / batch["kwargs"] are the model's inputs,
    batch["targets"] the tensors the loss compared the output with. Only used when LOSS_FN is set."""
    out = model(*batch["args"], **batch["kwargs"])
    raise NotImplementedError("write the loss here, as the script computes it from `out`")


LOSS_FN = None  # set to loss_fn when the probe asks for it


def make():
    if RUNNERS not in sys.path:
        sys.path.insert(0, RUNNERS)
    import _ts_script

    return _ts_script.capture(SCRIPT, ARGV, loss_fn=LOSS_FN)
'''


class Scaffold(BaseModel):
    path: str
    entrypoint: str
    script: str
    argv: list[str]
    training_calls: list[str]


TRAINING_CALLS = re.compile(r"\.step\(|\.backward\(|Trainer\(|\.fit\(|\.train\(")


def looks_like_script(path: Path) -> bool:
    """True for a file that runs training at top level or under `if __name__ == '__main__'`."""
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(TRAINING_CALLS.search(source))


def write_scaffold(script: Path, workspace: Path, argv: list[str] | None = None) -> Scaffold:
    """Write `.trainsleuth/scratch/probe_<name>.py` for `script`; ProbeError when it is no script."""
    script = script.resolve()
    if script.suffix != ".py" or not script.is_file():
        raise ProbeError(
            "bad_scaffold", f"{script} is not a Python file", "pass the training script, e.g. train.py"
        )
    source = script.read_text(encoding="utf-8", errors="replace")
    try:
        ast.parse(source, filename=str(script))
    except SyntaxError as exc:
        raise ProbeError(
            "bad_scaffold",
            f"{script.name} does not parse: {exc.msg} (line {exc.lineno})",
            "fix the syntax error first",
        ) from None
    calls = sorted(set(TRAINING_CALLS.findall(source)))
    if not calls:
        raise ProbeError(
            "bad_scaffold",
            f"{script.name} has no training step (no .backward(), .step(), Trainer(...) or .fit(...))",
            "scaffold the script that trains the model",
        )
    scratch = workspace / SCRATCH
    ensure_state_dir(workspace / ".trainsleuth")
    scratch.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"\W", "_", script.stem)
    target = scratch / f"probe_{stem}.py"
    try:
        rel = str(script.relative_to(workspace))
    except ValueError:
        rel = str(script)
    entry = f"{target.relative_to(workspace)}:make"
    target.write_text(
        TEMPLATE.format(
            rel=rel, entry=entry, script=str(script), argv=list(argv or []), runners=str(RUNNERS_DIR)
        ),
        encoding="utf-8",
    )
    return Scaffold(
        path=str(target),
        entrypoint=f"{target}:make",
        script=str(script),
        argv=list(argv or []),
        training_calls=calls,
    )
