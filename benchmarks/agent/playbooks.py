"""Run the agent benchmark's playbooks through the real CLI and count what each investigation cost.

    python -m benchmarks.agent.playbooks                 # every case, a table at the end
    python -m benchmarks.agent.playbooks resume_schedule # one case
    python -m benchmarks.agent.playbooks --json out.json

Each case is built as a real git repository in a temporary folder (`build.py`), then
`trainsleuth client run CASE/playbook.yaml --workspace REPO --json` drives a real `trainsleuth serve`
over stdio from the user's report to a verified fix, with this interpreter's folder (torch) first on
PATH and a private state folder. Counted per case, from the steps the playbook ran:

- protocol calls: start_investigation ... capture_knowledge (issue 22.3's figure; goal <= 6);
- diagnostic calls: the analysis tools (the work itself), plus get_job calls that followed a job;
- assistant actions: files written (`write`) and commands run (`shell`), e.g. the training run whose
  log is read, a scratch entrypoint, `git apply` of the fix;
- the decisive tool: the diagnostic step the playbook marks `decisive` in its name.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.agent.build import CASES, PLAYBOOKS_PENDING, build_case, playbook_cases
from benchmarks.protocol_calls import GOAL, PROTOCOL_TOOLS

COMMAND = "python -m benchmarks.agent.playbooks"


@dataclass
class CaseRun:
    case: str
    exit_code: int
    seconds: float
    protocol: list[str] = field(default_factory=list)
    diagnostic: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    job_polls: int = 0
    decisive: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""

    @property
    def resolved(self) -> bool:
        verified = any(
            s.get("tool") == "verify_fix" and (s.get("structured") or {}).get("passed") for s in self.steps
        )
        return self.exit_code == 0 and verified and "capture_knowledge" in self.protocol


def case_env(state_dir: Path) -> dict[str, str]:
    """This interpreter's folder first on PATH (the user's `python` has torch), a private state, one
    intra-op thread."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TRAINSLEUTH_STATE_DIR"] = str(state_dir)
    # One intra-op thread per training process: beside a second pytest worker on 2 cores, torch's
    # default thread pool spins against it and small models run many times slower.
    env["OMP_NUM_THREADS"] = "1"
    env.pop("TRAINSLEUTH_TOKEN", None)
    return env


def run_case(name: str, work: Path, timeout_s: float = 1800.0) -> CaseRun:
    """Build case `name` under `work` and run its playbook through `trainsleuth client run`."""
    repo = build_case(name, work / name)
    cmd = [
        sys.executable, "-m", "trainsleuth", "client", "run", str(CASES / name / "playbook.yaml"),
        "--workspace", str(repo), "--json",
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=repo,
        env=case_env(work / f"{name}-state"),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - started
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return CaseRun(
            name, proc.returncode, seconds, failures=[proc.stdout[-2000:]], stderr=proc.stderr[-4000:]
        )
    run = CaseRun(name, int(report["exit_code"]), seconds, steps=report["steps"], stderr=proc.stderr[-4000:])
    for step in run.steps:
        tool = step.get("tool")
        if tool in PROTOCOL_TOOLS:
            run.protocol.append(str(tool))
        elif tool:
            run.diagnostic.append(str(tool))
            if "decisive" in str(step.get("name", "")):
                run.decisive.append(str(tool))
        elif step.get("write") or step.get("shell"):
            run.actions.append(
                f"{'write' if step.get('write') else 'shell'}: {step.get('write') or step.get('shell')}"
            )
        run.job_polls += int(step.get("job_polls") or 0)
        run.failures += [f"{step.get('name')}: {f}" for f in step.get("failures") or []]
    return run


def table(runs: list[CaseRun]) -> str:
    rows = [
        "| case | resolved | protocol calls | diagnostic calls | decisive | assistant actions | get_job polls | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rows.append(
            f"| `{r.case}` | {'yes' if r.resolved else 'NO'} | {len(r.protocol)} | {len(r.diagnostic)} "
            f"({', '.join(r.diagnostic)}) | {', '.join(r.decisive) or '-'} | {len(r.actions)} | {r.job_polls} "
            f"| {r.seconds:.0f} |"
        )
    return "\n".join(rows)


def run_all(names: list[str]) -> list[CaseRun]:
    with tempfile.TemporaryDirectory(prefix="agent-playbooks-") as tmp:
        return [run_case(name, Path(tmp)) for name in names]


def run_benchmark(quick: bool = False) -> Any:
    from benchmarks.common import result

    runs = run_all(playbook_cases()[:2] if quick else playbook_cases())
    worst = max(len(r.protocol) for r in runs)
    unresolved = [r.case for r in runs if not r.resolved]
    return result(
        "protocol calls per resolved investigation, agent benchmark (worst case)",
        float(worst) if not unresolved else None,
        "the demo's 6 calls (python -m benchmarks.protocol_calls); 9 before issue 22.3",
        GOAL,
        direction="lower",
        unit="calls",
        details="; ".join(
            f"{r.case}: {len(r.protocol)} protocol, {len(r.diagnostic)} diagnostic, {r.seconds:.0f}s"
            for r in runs
        )
        + (f"; NOT RESOLVED: {', '.join(unresolved)}" if unresolved else ""),
        command=COMMAND,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "cases", nargs="*", help=f"default: every case with a playbook ({', '.join(playbook_cases())})"
    )
    p.add_argument("--json", type=Path, default=None, help="also write every run as JSON")
    args = p.parse_args(argv)
    unknown = sorted(set(args.cases) - set(playbook_cases()))
    if unknown:
        pending = sorted(set(unknown) & PLAYBOOKS_PENDING)
        if pending:
            p.error(f"no playbook yet for {pending} (benchmarks/agent/build.py PLAYBOOKS_PENDING)")
        p.error(f"unknown case(s) {unknown}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="agent-playbooks-") as tmp:
        for name in args.cases or playbook_cases():
            run = run_case(name, Path(tmp))
            runs.append(run)
            print(
                f"{name}: exit {run.exit_code}, {len(run.protocol)} protocol calls, {run.seconds:.0f}s",
                flush=True,
            )
            for failure in run.failures:
                print(f"    - {failure}", flush=True)
    print(table(runs))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2, default=str), encoding="utf-8")
    return 0 if all(r.resolved and len(r.protocol) <= GOAL for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
