"""Run the fault benchmark's cases through the public CLI and score the answers.

Running: each case is one subprocess, `trainsleuth probe ENTRY --json`, `trainsleuth logs analyze PATH
--json`, or `trainsleuth client call compare_precision --arg entrypoint=ENTRY --json`, a few at a time (a small thread pool; the machines are small). A case whose command fails or
prints no JSON is recorded as a failed run with the reason (for instance "not available yet").

Scoring (what counts, exactly):
- A labelled code is *detected* when the report holds a record with that code and severity `warning` or
  `error` (an `info` record does not count).
- Recall per code = detected / labelled. Overall recall counts every (case, code) label once.
- A healthy case is a *false alarm* when its report holds any `warning` or `error` record.
- Origin localisation: a label with `module` is right when some detected record of that code names one
  of the accepted modules. Step accuracy: a label with `step` is right when some detected record of that
  code has a step within `tol` of it. A missed label counts as wrong for both.
- Unexpected: on a broken case, a warning or error whose code is neither expected nor allowed.
- A case that failed to run counts as missed (broken case) or as not verified (healthy case).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.faults.manifest import Case

ROOT = Path(__file__).resolve().parents[2]
ALARM = ("warning", "error")


@dataclass
class CaseRun:
    case_id: str
    ok: bool
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)


def default_cli() -> list[str]:
    return [sys.executable, "-m", "trainsleuth"]


def command_for(case: Case, cli: Sequence[str]) -> list[str]:
    if case.kind == "precision":
        rel = case.path.relative_to(ROOT).as_posix() + ":" + case.target.rpartition(":")[2]
        return [*cli, "client", "call", "compare_precision", "--arg", f"entrypoint={rel}", "--json"]
    if case.kind == "probe":
        cmd = [*cli, "probe", case.entrypoint, "--json"]
        if case.steps:
            cmd += ["--steps", str(case.steps)]
        return cmd
    return [*cli, "logs", "analyze", str(case.path), "--json"]


def _parse_stdout(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if not text:
        return None
    try:
        obj = json.loads(text)
        return obj if isinstance(obj, dict) else None
    except json.JSONDecodeError:
        pass
    for line in reversed(text.splitlines()):  # tolerate chatter before the JSON line
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def _records(payload: dict[str, Any]) -> list[dict[str, Any]] | None:
    for key in ("findings", "events"):
        if isinstance(payload.get(key), list):
            return [r for r in payload[key] if isinstance(r, dict)]
    for key in ("report", "structured"):  # `trainsleuth client call ... --json` nests the tool's output
        inner = payload.get(key)
        if isinstance(inner, dict):
            return _records(inner)
    return None


def run_case(case: Case, cli: Sequence[str], timeout: float = 600.0) -> CaseRun:
    cmd = command_for(case, cli)
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return CaseRun(case.id, False, error=f"timed out after {timeout:.0f} s", seconds=timeout, command=cmd)
    except OSError as exc:
        return CaseRun(case.id, False, error=f"could not start {cmd[0]}: {exc}", command=cmd)
    seconds = time.perf_counter() - t0
    payload = _parse_stdout(proc.stdout)
    if payload is None:
        tail = " | ".join((proc.stderr or proc.stdout or "").strip().splitlines()[-3:])
        return CaseRun(
            case.id,
            False,
            error=f"exit {proc.returncode}, no JSON report: {tail}"[:400],
            seconds=seconds,
            command=cmd,
        )
    records = _records(payload)
    if records is None:
        err = payload.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        if not msg and payload.get("is_error"):
            msg = str(payload.get("text") or payload.get("failures") or "the tool answered isError")
        return CaseRun(
            case.id,
            False,
            error=f"exit {proc.returncode}: {msg or 'report has no findings/events list'}"[:400],
            seconds=seconds,
            command=cmd,
        )
    return CaseRun(case.id, True, records=records, seconds=seconds, command=cmd)


def run_all(
    cases: Sequence[Case],
    cli: Sequence[str] | None = None,
    jobs: int = 2,
    timeout: float = 600.0,
    progress: Callable[[CaseRun], None] | None = None,
) -> dict[str, CaseRun]:
    cli = list(cli or default_cli())
    out: dict[str, CaseRun] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_case, c, cli, timeout) for c in cases]
        for fut in as_completed(futures):
            res = fut.result()
            out[res.case_id] = res
            if progress:
                progress(res)
    return {c.id: out[c.id] for c in cases}


# ------------------------------------------------------------------------------------------- scoring


@dataclass
class CodeScore:
    code: str
    kind: str
    labelled: int = 0
    detected: int = 0
    missed: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        return self.detected / self.labelled if self.labelled else None


@dataclass
class Score:
    per_code: dict[str, CodeScore] = field(default_factory=dict)
    labels: int = 0
    detected: int = 0
    healthy_total: int = 0
    false_alarms: dict[str, list[str]] = field(default_factory=dict)  # case -> alarm codes
    origin_total: int = 0
    origin_right: int = 0
    origin_wrong: list[str] = field(default_factory=list)
    step_total: int = 0
    step_right: int = 0
    step_wrong: list[str] = field(default_factory=list)
    unexpected: dict[str, list[str]] = field(default_factory=dict)  # case -> codes
    failed_runs: dict[str, str] = field(default_factory=dict)
    cases: int = 0

    @property
    def recall(self) -> float | None:
        return self.detected / self.labels if self.labels else None

    @property
    def origin_accuracy(self) -> float | None:
        return self.origin_right / self.origin_total if self.origin_total else None

    @property
    def step_accuracy(self) -> float | None:
        return self.step_right / self.step_total if self.step_total else None

    @property
    def healthy_clean(self) -> int:
        return (
            self.healthy_total
            - len(self.false_alarms)
            - sum(1 for cid in self.failed_runs if cid in self._healthy_ids)
        )

    _healthy_ids: set[str] = field(default_factory=set)


def _alarms(records: list[dict[str, Any]], code: str | None = None) -> list[dict[str, Any]]:
    return [r for r in records if r.get("severity") in ALARM and (code is None or r.get("code") == code)]


def _step_of(rec: dict[str, Any]) -> int | None:
    step = rec.get("step")
    if isinstance(step, bool):
        return None
    if isinstance(step, (int, float)):
        return int(step)
    return None


def _mod(name: object) -> str:
    """A module path as people read it: '' is the model itself, None is no module named."""
    if name is None:
        return "no module"
    return "(the model itself)" if name == "" else str(name)


def score(cases: Sequence[Case], runs: dict[str, CaseRun]) -> Score:
    s = Score(cases=len(cases))
    for case in cases:
        run = runs.get(case.id)
        ok = run is not None and run.ok
        if not ok:
            s.failed_runs[case.id] = run.error if run is not None else "not run"
        records = run.records if ok and run is not None else []
        if case.healthy:
            s.healthy_total += 1
            s._healthy_ids.add(case.id)
            if ok:
                alarms = _alarms(records)
                if alarms:
                    s.false_alarms[case.id] = sorted({str(r.get("code")) for r in alarms})
            continue
        for e in case.expect:
            cs = s.per_code.setdefault(e.code, CodeScore(e.code, case.kind))
            cs.labelled += 1
            s.labels += 1
            hits = _alarms(records, e.code)
            if hits:
                cs.detected += 1
                s.detected += 1
            else:
                cs.missed.append(case.id)
            if e.module is not None:
                s.origin_total += 1
                if any(r.get("module") in e.module for r in hits):
                    s.origin_right += 1
                else:
                    got = sorted({_mod(r.get("module")) for r in hits}) or ["not detected"]
                    want = " or ".join(_mod(m) for m in e.module)
                    s.origin_wrong.append(f"{case.id} ({e.code}: got {', '.join(got)}; expected {want})")
            if e.step is not None:
                s.step_total += 1
                steps = [st for st in (_step_of(r) for r in hits) if st is not None]
                if any(abs(st - e.step) <= e.tol for st in steps):
                    s.step_right += 1
                else:
                    got_s = ", ".join(str(st) for st in sorted(set(steps))) or "not detected"
                    s.step_wrong.append(f"{case.id} ({e.code}: got {got_s}; expected {e.step} ± {e.tol})")
        if ok:
            permitted = {e.code for e in case.expect} | set(case.allow)
            extra = sorted({str(r.get("code")) for r in _alarms(records)} - permitted)
            if extra:
                s.unexpected[case.id] = extra
    return s


# ------------------------------------------------------------------------------------------- report


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def render_markdown(s: Score, command: str, when: str, wall_s: float) -> str:
    lines = [
        f"Command: `{command}` ({when}, {s.cases} cases, {wall_s:.0f} s wall on this machine).",
        "",
        "| figure | value | goal |",
        "|---|---|---|",
        f"| recall over all labelled codes | {_fmt(s.recall)} ({s.detected}/{s.labels}) | >= 0.95 |",
        f"| healthy cases with a warning or error | {len(s.false_alarms)}/{s.healthy_total} | 0 |",
        f"| origin localisation | {_fmt(s.origin_accuracy)} ({s.origin_right}/{s.origin_total}) | >= 0.9 |",
        f"| step accuracy (within each label's tolerance) | {_fmt(s.step_accuracy)} ({s.step_right}/{s.step_total}) | - |",
        f"| broken cases with an unexpected warning/error | {len(s.unexpected)}/{s.cases - s.healthy_total} | - |",
        f"| cases that failed to run | {len(s.failed_runs)} | 0 |",
        "",
        "| code | command | labelled | detected | recall | missed in |",
        "|---|---|---|---|---|---|",
    ]
    for code in sorted(s.per_code, key=lambda c: (s.per_code[c].kind, c)):
        cs = s.per_code[code]
        cmd = {"probe": "probe", "logs": "logs analyze", "precision": "client call compare_precision"}[
            cs.kind
        ]
        lines.append(
            f"| `{code}` | {cmd} | {cs.labelled} | {cs.detected} | {_fmt(cs.recall)} | {', '.join(cs.missed) or '-'} |"
        )
    details: list[str] = []
    if s.false_alarms:
        details.append(
            "False alarms on healthy cases: "
            + "; ".join(f"{k} ({', '.join(v)})" for k, v in sorted(s.false_alarms.items()))
            + "."
        )
    if s.origin_wrong:
        details.append("Origin wrong or missing: " + "; ".join(s.origin_wrong) + ".")
    if s.step_wrong:
        details.append("Step wrong or missing: " + "; ".join(s.step_wrong) + ".")
    if s.unexpected:
        details.append(
            "Unexpected codes on broken cases: "
            + "; ".join(f"{k} ({', '.join(v)})" for k, v in sorted(s.unexpected.items()))
            + "."
        )
    if s.failed_runs:
        details.append(
            "Failed runs: " + "; ".join(f"{k}: {v}" for k, v in sorted(s.failed_runs.items())) + "."
        )
    if details:
        lines.append("")
        lines += [f"- {d}" for d in details]
    return "\n".join(lines) + "\n"


BEGIN = "<!-- faults-table:begin (written by python -m benchmarks.faults) -->"
END = "<!-- faults-table:end -->"


def write_table(doc: Path, table: str) -> None:
    """Replace the table between the markers in docs/benchmarks.md (markers are added under the
    fault section's heading the first time)."""
    text = doc.read_text(encoding="utf-8")
    block = f"{BEGIN}\n{table}{END}"
    if BEGIN in text and END in text:
        start = text.index(BEGIN)
        end = text.index(END) + len(END)
        text = text[:start] + block + text[end:]
    else:
        heading = "## Fault benchmark (`python -m benchmarks.faults`)"
        if heading not in text:
            text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
        else:
            i = text.index(heading) + len(heading)
            nxt = text.find("\n## ", i)
            section = text[i:] if nxt < 0 else text[i:nxt]
            new_section = section.replace("_pending_", "").rstrip("\n") + f"\n\n{block}\n"
            text = text[:i] + new_section + ("" if nxt < 0 else text[nxt:])
    doc.write_text(text, encoding="utf-8")
