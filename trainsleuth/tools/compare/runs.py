"""Read one run for a comparison: its metric curves (through the log reader's public entry points,
or from a probe report), where its log restarts (a resume), and the log's own events.

A run is a log file, a run folder (TensorBoard, MLflow, HF output dir, wandb run, a folder with a
metrics file and a config), a probe report (`trainsleuth probe --json` output), or a live probe
run folder (`trainsleuth.probe.attach`).
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.tools.compare.band import Curve
from trainsleuth.tools.findings import Finding

# Roles worth comparing (epoch counters, step counters and progress counters only restate the step).
COMPARED_ROLES = [
    "loss", "val_loss", "loss_component", "grad_norm", "lr", "loss_scale", "throughput", "step_time",
    "accuracy", "val_accuracy", "perplexity", "reward", "kl", "entropy", "skipped", "nan_iterations",
    "batch_size", "memory", "other",
]  # fmt: skip
MAX_POINTS = 5000
MAX_WALK = 2000
LOG_SUFFIXES = {".log", ".txt", ".out", ".err", ".jsonl", ".ndjson", ".csv", ".tsv"}
LOG_HINTS = ("metric", "train", "log", "output", "progress", "history", "events", "stdout", "console")


class RunInputError(Exception):
    """The path cannot be read as a run; the message says why and what to pass instead."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


@dataclass
class Run:
    path: str
    kind: str  # log | probe_report | probe_run
    format: str = ""
    log_file: str | None = None
    curves: dict[str, Curve] = field(default_factory=dict)
    restarts: list[float] = field(default_factory=list)  # first step of each later segment
    # metric -> (step, value logged first, value logged again later) where a step was logged twice
    replays: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    events: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        p = Path(self.path)
        return p if p.is_dir() else p.parent


def load_run(path: Path, cancel: threading.Event | None = None, prefer: str | None = None) -> Run:
    """`prefer`: in a run folder, read the file of this name when there is one (the name the other
    run's log has), so both runs are read the same way."""
    path = Path(path)
    if not path.exists():
        raise RunInputError(
            f"{path}: no such file or folder", "pass a log file, a run folder or a probe report"
        )
    if path.is_file() and path.suffix.lower() == ".json":
        probe = _probe_report(path)
        if probe is not None:
            return probe
    if (
        path.is_dir()
        and (path / "steps.jsonl").exists()
        and ((path / "meta.json").exists() or (path / "findings.json").exists())
    ):
        return _probe_run(path)
    target, note = pick_log(path, prefer) if path.is_dir() else (path, None)
    run = Run(path=str(path), kind="log", log_file=str(target))
    if note:
        run.notes.append(note)
    _read_log(run, target, cancel)
    return run


def pick_log(folder: Path, prefer: str | None = None) -> tuple[Path, str | None]:
    """The log to read in a run folder: the folder itself when the log reader knows its layout
    (TensorBoard, MLflow, HF trainer_state), else its most log-like file."""
    from trainsleuth.tools.compare.configs import is_config_or_env_file

    if (folder / "metrics").is_dir():
        return folder, None
    candidates: list[tuple[int, int, Path]] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        depth = len(Path(dirpath).relative_to(folder).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and depth < 4)
        for fn in sorted(filenames):
            seen += 1
            if seen > MAX_WALK:
                break
            p = Path(dirpath) / fn
            if "tfevents" in fn or fn == "trainer_state.json":
                return folder, None
            if p.suffix.lower() not in LOG_SUFFIXES or is_config_or_env_file(p):
                continue
            try:
                size = p.stat().st_size
            except OSError:
                continue
            if size == 0:
                continue
            # structured metric files first, then names that say "log"; the largest among equals
            hint = sum(h in p.stem.lower() for h in LOG_HINTS) + 2 * (
                p.suffix.lower() in (".jsonl", ".csv", ".tsv")
            )
            hint += 10 * (prefer is not None and fn == prefer)
            candidates.append((hint, size, p))
    if not candidates:
        raise RunInputError(
            f"{folder} holds no training log (no .log/.txt/.jsonl/.csv file, TensorBoard events, MLflow "
            "metrics or trainer_state.json)",
            "pass the log file itself, or the run's output folder",
        )
    candidates.sort(key=lambda c: (-c[0], -c[1], str(c[2])))
    chosen = candidates[0][2]
    note = None
    if len(candidates) > 1:
        others = ", ".join(c[2].relative_to(folder).as_posix() for c in candidates[1:4])
        note = (
            f"read {chosen.relative_to(folder).as_posix()} as the log of {folder.name} (also there: {others}); "
            "pass a file to choose another"
        )
    return chosen, note


def _read_log(run: Run, target: Path, cancel: threading.Event | None) -> None:
    analyze, extract, LogInputError = _log_reader()

    try:
        res = extract(target, COMPARED_ROLES, max_points=MAX_POINTS, cancel=cancel)
        report = analyze(target, cancel=cancel)
    except LogInputError as exc:
        raise RunInputError(f"{target}: {exc.message}", exc.next_step) from None
    run.format = res.format
    for s in res.series:
        if s.role == "other" and len(s.values) < 5:
            continue  # a stray number in a text line, not a metric
        # finite points only: NaN/Inf are counted by the reader (first_nonfinite_step), and newer
        # readers mark them in `values` as strings
        finite = [
            (float(st), float(v))
            for st, v in zip(s.steps, s.values, strict=False)
            if isinstance(v, (int, float)) and math.isfinite(v)
        ]
        steps, values, replayed = _last_per_step([p[0] for p in finite], [p[1] for p in finite])
        if replayed:
            run.replays[s.name] = replayed
        run.curves[s.name] = Curve(
            name=s.name,
            role=s.role,
            steps=steps,
            values=values,
            points_in_log=s.points_in_log,
            first_nonfinite_step=s.first_nonfinite_step,
            positional=s.step_source != "log",
        )
    run.restarts = [float(seg.first_step) for seg in report.segments[1:]]
    run.events = [e for e in report.events if e.severity != "info"][:50]
    if any(s.points_in_log > MAX_POINTS for s in res.series):
        run.notes.append(
            f"long series were thinned to {MAX_POINTS} points (each span's extremes kept) before comparing"
        )


def _log_reader() -> tuple[Any, Any, Any]:
    """The log reader's public entry points. `analyze` is imported first: importing the `extract`
    submodule first would leave the package attribute `analyze` bound to the `analyze` submodule
    (Python sets it on first import), for this process and everyone in it."""
    from trainsleuth.tools.logs import LogInputError, analyze, extract

    if not callable(analyze):  # someone imported the submodule before the package exported it
        from trainsleuth.tools.logs.analyze import analyze
    if not callable(extract):
        from trainsleuth.tools.logs.extract import extract
    return analyze, extract, LogInputError


def _last_per_step(
    steps: list[float], values: list[float]
) -> tuple[list[float], list[float], list[tuple[float, float, float]]]:
    """A step logged again later (after a restart) replaces the earlier record; the pairs are kept
    so a replay can be checked against what it replays."""
    order = sorted(range(len(steps)), key=lambda i: steps[i])  # stable: earlier records first
    out_s: list[float] = []
    out_v: list[float] = []
    replayed: list[tuple[float, float, float]] = []
    for i in order:
        if out_s and out_s[-1] == steps[i]:
            replayed.append((steps[i], out_v[-1], values[i]))
            out_v[-1] = values[i]
        else:
            out_s.append(steps[i])
            out_v.append(values[i])
    # a step logged three times: keep the first and the last value
    merged: dict[float, tuple[float, float, float]] = {}
    for st, first, last in replayed:
        merged[st] = (st, merged[st][1], last) if st in merged else (st, first, last)
    return out_s, out_v, list(merged.values())


def _probe_report(path: Path) -> Run | None:
    try:
        if path.stat().st_size > 64 << 20:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if (
        not isinstance(data, dict)
        or "findings" not in data
        or not ("losses" in data or "global_grad_norms" in data)
    ):
        return None
    run = Run(path=str(path), kind="probe_report", format="probe report")
    observed = data.get("observed_steps") if isinstance(data.get("observed_steps"), list) else None
    for name, key in (("loss", "losses"), ("grad_norm", "global_grad_norms")):
        seq = data.get(key) or []
        if seq:
            steps = observed if observed and len(observed) == len(seq) else range(1, len(seq) + 1)
            run.curves[name] = _curve(name, name, list(zip(steps, seq, strict=False)))
    found = [_finding(f) for f in data.get("findings", []) if isinstance(f, dict)]
    run.events = [f for f in found if f is not None and f.severity != "info"]
    if observed:
        run.notes.append(
            "steps of this probe report are the run's own optimizer steps (its command was observed)"
        )
    else:
        run.notes.append("steps of a probe report are probe steps on one fixed batch (1, 2, ...)")
    return run


def _probe_run(path: Path) -> Run:
    from trainsleuth.tools.probe.report import ProbeError

    try:
        from trainsleuth.tools.probe.live import read_probe_run

        report = read_probe_run(path)
    except ProbeError as exc:
        raise RunInputError(exc.message, exc.next_step) from None
    run = Run(path=str(path), kind="probe_run", format="live probe run")
    for name, points in report.trends.items():
        role = "grad_norm" if "grad" in name else ("loss" if "loss" in name else "other")
        run.curves[name] = _curve(name, role, list(points))
    run.events = [f for f in report.findings if f.severity != "info"]
    return run


def _num(v: Any) -> float:
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v.lower() in ("nan", "inf", "-inf", "+inf"):
        return float(v)
    return math.nan


def _curve(name: str, role: str, points: list[tuple[Any, Any]]) -> Curve:
    steps: list[float] = []
    values: list[float] = []
    first_bad: float | None = None
    for step, raw in points:
        v = _num(raw)
        if math.isfinite(v):
            steps.append(float(step))
            values.append(v)
        elif first_bad is None and raw is not None:
            first_bad = float(step)
    return Curve(name, role, steps, values, points_in_log=len(points), first_nonfinite_step=first_bad)


def _finding(raw: dict[str, Any]) -> Finding | None:
    try:
        return Finding.model_validate(raw)
    except ValueError:
        return None
