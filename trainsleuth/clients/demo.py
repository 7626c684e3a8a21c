"""`trainsleuth demo`: a real MCP client drives a real `trainsleuth serve` subprocess over stdio
through one whole investigation of the bundled broken training example (examples/demo).

Nothing is simulated: every result printed comes from the server's tools, run on a scratch copy
of the example (the bundled files are never modified). The person's approval is given through
MCP elicitation: the demo stands in for the person at the keyboard, answers the server's approval
dialog itself, and says so in the transcript and in the approval record.
If a step fails, or a tool this version lacks answers "not available yet", the demo stops and
names the tool and the reason; it never fakes a result.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXAMPLE_FILES = ("model.py", "train.py", "train.log", "README.md", "fix/model.py")
REPRO_STEPS = 45
PROBE_ENTRYPOINT = "train.py:probe_epoch_end"
APPROVER = "trainsleuth demo, standing in for the person (it answered the approval dialog itself)"


class DemoFailure(Exception):
    """A step of the demo failed; the message names the tool or the missing piece."""


def bundled_example() -> Path:
    """The example beside the package (source checkout or sdist)."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / "examples" / "demo", here.parent / "demo_example"):
        if (candidate / "train.py").is_file():
            return candidate
    raise DemoFailure(
        "the bundled example (examples/demo) is not installed beside this trainsleuth; run the demo from a "
        "source checkout, or pass --example PATH to a copy of examples/demo"
    )


def server_command() -> list[str]:
    launcher = Path(sys.executable).parent / ("trainsleuth.exe" if os.name == "nt" else "trainsleuth")
    return [str(launcher)] if launcher.exists() else [sys.executable, "-m", "trainsleuth"]


@dataclass
class DemoResult:
    out_dir: Path
    workspace: Path
    investigation_id: str
    plot: Path
    report: Path
    transcript: Path
    seconds: float
    calls: list[str] = field(default_factory=list)


class Narrator:
    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.start = time.monotonic()
        self.lines: list[str] = []

    def say(self, text: str, indent: str = "") -> None:
        stamp = f"[{time.monotonic() - self.start:5.1f}s] "
        first, *rest = text.splitlines() or [""]
        lines = [stamp + indent + first] + [" " * len(stamp) + indent + r for r in rest]
        for line in lines:
            self.lines.append(line)
            self.emit(line)

    def detail(self, text: str, limit: int = 12) -> None:
        rows = text.strip().splitlines()
        shown = rows[:limit] + ([f"... ({len(rows) - limit} more lines)"] if len(rows) > limit else [])
        for row in shown:
            line = " " * 10 + "| " + row
            self.lines.append(line)
            self.emit(line)


def _prepare_workspace(example: Path, workspace: Path) -> None:
    missing = [f for f in EXAMPLE_FILES if not (example / f).is_file()]
    if missing:
        raise DemoFailure(f"the example at {example} lacks {', '.join(missing)}")
    for name in EXAMPLE_FILES:
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(example / name, target)
    git = shutil.which("git")
    if git:  # a fix attempt records HEAD; a repository makes the fix's diff exact
        env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@localhost"}
        env |= {"GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@localhost"}
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the demo example, as shipped"]):
            subprocess.run([git, *cmd], cwd=workspace, env=env, check=True, capture_output=True, timeout=60)


def _check_torch(python: str) -> None:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    proc = subprocess.run([python, "-c", probe], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise DemoFailure(
            f"the demo trains a small PyTorch model, but {python} has no torch; "
            "install it with: pip install 'trainsleuth[torch]'"
        )


async def run_demo(
    out_dir: Path, *, example: Path | None = None, emit: Callable[[str], None] = print
) -> DemoResult:
    """Run the whole investigation; raise DemoFailure naming the failed step."""
    from mcp import Client, StdioServerParameters
    from mcp.client.context import ClientRequestContext
    from mcp_types import ElicitRequestParams, ElicitResult

    example = example or bundled_example()
    out_dir.mkdir(parents=True, exist_ok=True)
    workspace = out_dir / "workspace"
    if workspace.exists():
        raise DemoFailure(f"{workspace} already exists; pass another --out folder")
    workspace.mkdir()
    n = Narrator(emit)
    python = sys.executable
    n.say("trainsleuth demo: a real MCP client drives `trainsleuth serve` (stdio) through one investigation.")
    n.say(f"Example: {example} -> scratch copy {workspace} (the bundled files are never modified).")
    _prepare_workspace(example, workspace)
    _check_torch(python)
    reproducer = f"{shlex.quote(python)} train.py --steps {REPRO_STEPS}"
    calls: list[str] = []
    approvals: list[str] = []

    async def answer_approval(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        message = getattr(params, "message", "")
        approvals.append(message)
        n.say("<- the server asks a person to approve the diagnosis (MCP elicitation):", "   ")
        n.detail(message, limit=20)
        n.say("-> the demo stands in for the person here and answers: approve.", "   ")
        return ElicitResult(
            action="accept",
            content={
                "decision": "approve",
                "comment": "The probe pins the NaN on encoder.norm and the padded batch has all-zero rows.",
                "name": APPROVER,
            },
        )

    params = StdioServerParameters(
        command=server_command()[0],
        args=[*server_command()[1:], "serve", "--workspace", str(workspace)],
        cwd=str(workspace),
        # The scratch workspace's protocol state stays beside it, not in the user's own state folder.
        env={**os.environ, "TRAINSLEUTH_STATE_DIR": str(out_dir / "state")},
    )
    plot_path = out_dir / "training-log.png"
    async with Client(params, elicitation_callback=answer_approval) as client:

        async def call(tool: str, args: dict[str, Any], why: str) -> tuple[dict[str, Any], Any]:
            n.say(f"-> {tool}: {why}")
            calls.append(tool)
            result = await client.call_tool(tool, args)
            text = "\n".join(getattr(c, "text", "") for c in result.content if getattr(c, "text", None))
            if result.is_error:
                missing = "not available yet" in text
                raise DemoFailure(
                    f"{tool} {'is not available in this version' if missing else 'failed'}: {text.strip()}"
                )
            data = result.structured_content
            if not isinstance(data, dict):
                raise DemoFailure(f"{tool} returned no structured result")
            n.detail(text)
            return data, result

        started, _ = await call(
            "start_investigation",
            {
                "symptom": "Training loss turns NaN after about 40 steps and never recovers.",
                "expected": "the loss keeps falling (it reaches about 0.1 by step 39)",
                "observed": "loss and grad norm are NaN from some step on",
                "started_when": "since the data pipeline pads the last batch of each epoch to full size",
                "what_changed": "the padding of short batches",
                "reproducible": "always",
                "reproducer": reproducer,
            },
            "open an investigation with the symptom and a reproducer the server can run",
        )
        n.say(f"   pathway: {started['pathway']} ({started['pathway_reason']})")
        iid = str(started["investigation_id"])

        log, log_result = await call(
            "analyze_training_log",
            {"path": "train.log", "plot": True},
            "analyse the run's log (its result becomes evidence of the open investigation by itself)",
        )
        nonfinite = [e for e in log.get("events", []) if e.get("code") == "nonfinite_metric"]
        if not nonfinite:
            raise DemoFailure("analyze_training_log found no nonfinite_metric event in the example's log")
        first_nan = min(int(e["step"]) for e in nonfinite if e.get("step") is not None)
        images = [c for c in log_result.content if getattr(c, "type", None) == "image"]
        if not images:
            raise DemoFailure("analyze_training_log returned no plot image (plot=true)")
        plot_path.write_bytes(base64.b64decode(images[0].data))
        n.say(f"   the log says: the loss is first non-finite at step {first_nan}; plot saved to {plot_path}")

        probe, _ = await call(
            "probe_gradients",
            {"entrypoint": PROBE_ENTRYPOINT, "steps": 2},
            f"run the model on the batch of step {first_nan} and find where the NaN is born",
        )
        origin = next((f for f in probe.get("findings", []) if f.get("code") == "nonfinite_forward"), None)
        if origin is None:
            raise DemoFailure(
                "probe_gradients did not locate a nonfinite_forward origin on the failing batch"
            )
        n.say(f"   NaN origin: {origin.get('module')} ({origin.get('message')})")

        batch_check = _inspect_batch(python, workspace, first_nan)
        n.say(f"   the demo looked at the failing batch itself: {batch_check['summary']}")
        evidence = [str(log["evidence_id"]), str(probe["evidence_id"])]
        if not all(evidence) or "None" in evidence:
            raise DemoFailure("the analysis results were not recorded as evidence of the open investigation")

        await call(
            "submit_diagnosis",
            {
                "investigation_id": iid,
                "symptom": f"loss and grad norm are NaN from step {first_nan} on",
                "root_cause": "L2Norm (encoder.norm) divides by the row norm with no floor; the all-zero "
                "padding rows of each epoch's last batch have norm 0, giving 0/0 = NaN",
                "evidence_ids": evidence,
                "mechanism": "the padding rows stay zero through the bias-free projection and the ReLU; "
                "x / ||x|| is 0/0 for them, the NaN reaches the loss, the backward pass and every weight "
                "after one optimizer step, so every later loss is NaN",
                "proposed_fix": {
                    "files": ["model.py"],
                    "change": "floor the norm in L2Norm: x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)",
                },
                "side_effects": "all-zero rows now normalise to zero vectors instead of NaN",
                "will_not_fix": "padding rows still contribute to the loss; masking them is a separate change",
                "confidence": 0.9,
                "alternatives_considered": ["learning rate too high", "corrupt (non-finite) inputs"],
                "disproving_observation": "NaN at the same step with the floored norm, or no all-zero rows in "
                "the failing batch",
                "disproof_looked_for": True,
                "disproof_result": batch_check["summary"],
            },
            "Gate 4: root cause, evidence, the one change and its file; the server runs the reproducer on the "
            "unfixed tree",
        )

        await call(
            "approve_diagnosis",
            {"investigation_id": iid},
            "ask for a person's approval (the server shows the diagnosis in an approval dialog)",
        )
        if not approvals:
            raise DemoFailure("approve_diagnosis did not ask for approval through elicitation")

        # The approval began the fix attempt (the server recorded the repository state as approved).
        shutil.copy2(workspace / "fix" / "model.py", workspace / "model.py")
        n.say("   applied the example's fix in the scratch copy: model.py now floors the norm (one change)")

        verified, _ = await call(
            "verify_fix",
            {"investigation_id": iid, "learned": "a norm needs a floor when rows can be all zero"},
            f"the server runs the reproducer: {reproducer}",
        )
        if not verified.get("passed"):
            raise DemoFailure("verify_fix ran the reproducer and it still fails")

        captured, _ = await call(
            "capture_knowledge",
            {
                "investigation_id": iid,
                "lessons": [
                    "Divisions by a norm or standard deviation need a floor (eps or clamp_min) whenever a "
                    "row can be all zero, for example padding.",
                    "A NaN that appears at a fixed step is a data or code-path event: locate its origin "
                    "with a probe on that step's batch before touching the optimizer.",
                ],
                "constraint": {
                    "title": "Normalisations have a floor",
                    "rule": "Every division by a norm or standard deviation uses an eps or clamp_min floor",
                    "details": ["padding rows are all zero", f"investigation {iid}"],
                },
                "fix_pattern": True,
            },
            "close the investigation: root-cause analysis, a new constraint, a fix pattern",
        )
        rca = Path(str(captured["rca_path"]))
        if not rca.is_absolute():
            rca = workspace / rca

    report_path = out_dir / "report.md"
    if not rca.is_file():
        raise DemoFailure(f"capture_knowledge reported {rca} but the file is not there")
    shutil.copy2(rca, report_path)
    seconds = time.monotonic() - n.start
    n.say(f"Done in {seconds:.1f}s: investigation {iid} resolved by a verified fix and closed.")
    n.say(f"Plot: {plot_path}\nReport: {report_path}\nWorkspace: {workspace}")
    transcript_path = out_dir / "transcript.txt"
    transcript_path.write_text("\n".join(n.lines) + "\n", encoding="utf-8")
    return DemoResult(out_dir, workspace, iid, plot_path, report_path, transcript_path, seconds, calls)


def _inspect_batch(python: str, workspace: Path, step: int) -> dict[str, Any]:
    """Measure the failing batch in the user's interpreter: all-zero rows and non-finite values."""
    code = textwrap.dedent(
        f"""
        import json, torch
        from train import make_batch
        x, _ = make_batch({int(step)})
        print(json.dumps({{"rows": x.shape[0], "zero_rows": int((x.abs().sum(-1) == 0).sum()),
                          "finite": bool(torch.isfinite(x).all())}}))
        """
    )
    proc = subprocess.run(
        [python, "-c", code],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise DemoFailure(f"inspecting the batch of step {step} failed: {proc.stderr.strip()[-500:]}")
    data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    data["step"] = step
    data["summary"] = (
        f"the batch of step {step} has {data['zero_rows']} all-zero (padding) rows of {data['rows']}; "
        f"all inputs finite: {data['finite']}"
    )
    return data


def default_out_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="trainsleuth-demo-"))
