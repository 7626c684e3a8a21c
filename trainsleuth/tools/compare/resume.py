"""`check_resume`: train N steps and save, restore in a fresh process and continue M steps, and
compare with the same run uninterrupted; name what the resume did not restore.

Both processes run `runners/resume_runner.py` in the user's interpreter. Every piece of training
state is fingerprinted right after step N (reference) and right after the restore (resumed):
model weights, buffers, optimizer state and hyperparameters, scheduler, grad scaler, EMA, RNG
states; the batch each later step trains on, its loss, the learning rate and the weights after it
are recorded too. A piece that differs at the restore is named with the first later step where
training shows it; training that differs although every piece matches is either state the runner
cannot see (a counter in your step code) or nondeterminism, which a second reference run tells apart.
"""

from __future__ import annotations

import math
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.runners.launch import RunnerError, run_runner

REL_TOL = 1e-9


class ResumeError(Exception):
    def __init__(
        self, kind: str, message: str, next_step: str | None = None, detail: str | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.next_step = next_step
        self.detail = detail


class NotRestored(BaseModel):
    piece: str = Field(description="what the resume did not restore")
    detail: str
    affects_training: bool = Field(
        description="the resumed run's loss or weights differ within the checked steps"
    )
    first_step: int | None = Field(default=None, description="first step where training shows it")


class StepPair(BaseModel):
    step: int
    loss_reference: float | str | None = None
    loss_resumed: float | str | None = None


Verdict = Literal["restored", "not_restored", "unexplained", "nondeterministic"]


class ResumeReport(BaseModel):
    entrypoint: str
    interpreter: str
    mode: str = Field(description="'user save/load' (your code) or 'state_dict' (the runner's full save)")
    steps_before: int
    steps_after: int
    verdict: Verdict
    healthy: bool
    not_restored: list[NotRestored] = Field(default_factory=list)
    first_divergence: str | None = Field(default=None, description="e.g. 'loss at step 6'")
    steps: list[StepPair] = Field(default_factory=list)
    untested: list[str] = Field(default_factory=list, description="pieces this run could not test, and why")
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


PIECES: dict[str, tuple[str, list[str]]] = {
    "model": ("model weights", ["checkpoint-key-mismatch"]),
    "buffers": ("model buffers (e.g. BatchNorm running statistics)", ["checkpoint-key-mismatch"]),
    "optimizer_state": ("optimizer state (moments / momentum)", ["optimizer-state-not-restored"]),
    "optimizer_groups": (
        "optimizer hyperparameters (param_groups: lr, ...)",
        ["optimizer-state-not-restored"],
    ),
    "scheduler": ("LR scheduler step", ["optimizer-state-not-restored", "lr-schedule-misconfigured"]),
    "scaler": ("grad scaler", ["optimizer-state-not-restored", "fp16-loss-scaling"]),
    "ema": ("EMA weights", ["optimizer-state-not-restored"]),
    "rng": ("RNG state", ["resume-data-position", "rank-dependent-randomness"]),
    "data": ("dataloader position", ["resume-data-position"]),
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-300)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _diff_keys(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(differing, only in a, only in b) keys of two flat fingerprint maps."""
    differ = [k for k in a if k in b and not _same(a[k], b[k])]
    return differ, [k for k in a if k not in b], [k for k in b if k not in a]


def _names(keys: list[str], n: int = 4) -> str:
    more = f" and {len(keys) - n} more" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more


def _boundary_diffs(ref: dict[str, Any], res: dict[str, Any]) -> dict[str, str]:
    """Piece -> what differs, for every piece whose fingerprint differs right after the restore."""
    out: dict[str, str] = {}
    a, b = ref["boundary"], res["boundary"]
    for piece in ("model", "buffers", "optimizer_state", "optimizer_groups", "scheduler", "scaler", "ema"):
        if piece not in a and piece not in b:
            continue
        pa, pb = a.get(piece) or {}, b.get(piece) or {}
        differ, only_a, only_b = _diff_keys(pa, pb)
        if piece == "optimizer_state" and pa and not pb:
            out[piece] = (
                f"the resumed optimizer has no state at all (fresh moments), the uninterrupted one has {len(pa)} entries"
            )
        elif piece == "optimizer_groups" and differ:
            out[piece] = "param_groups differ: " + "; ".join(f"{k}: {pa[k]} vs {pb[k]}" for k in differ[:4])
        elif piece == "scheduler" and (differ or only_a or only_b):
            keys = differ or only_a or only_b
            out[piece] = "scheduler state differs: " + "; ".join(
                f"{k}: {pa.get(k)} vs {pb.get(k)}" for k in keys[:3]
            )
        elif piece == "scaler" and (differ or only_a or only_b):
            keys = differ or only_a or only_b
            out[piece] = "grad scaler state differs: " + "; ".join(
                f"{k}: {pa.get(k)} vs {pb.get(k)}" for k in keys[:3]
            )
        elif differ or only_a or only_b:
            parts = []
            if differ:
                parts.append(f"{len(differ)} of {len(pa)} differ ({_names(differ)})")
            if only_a:
                parts.append(f"missing after the restore: {_names(only_a)}")
            if only_b:
                parts.append(f"only after the restore: {_names(only_b)}")
            out[piece] = "; ".join(parts)
    ra, rb = a.get("rng", {}), b.get("rng", {})
    rng_diff = [k for k in ra if k in rb and not _same(ra[k], rb[k])]
    if rng_diff:
        out["rng"] = f"generator state differs after the restore: {', '.join(rng_diff)}"
    return out


def _first(ref_steps: list[dict[str, Any]], res_steps: list[dict[str, Any]], key: str) -> int | None:
    by_step = {s["step"]: s for s in ref_steps}
    for s in res_steps:
        r = by_step.get(s["step"])
        if r is not None and key in r and not _same(r.get(key), s.get(key)):
            return int(s["step"])
    return None


def analyse(ref: dict[str, Any], res: dict[str, Any], n: int) -> tuple[dict[str, str], dict[str, int | None]]:
    pieces = _boundary_diffs(ref, res)
    after_ref = [s for s in ref["steps"] if s["step"] > n]
    firsts = {
        key: _first(after_ref, res["steps"], key) for key in ("batch", "lr", "loss", "model", "optimizer")
    }
    if firsts["batch"] is not None:
        pieces["data"] = f"step {firsts['batch']} trains on a different batch than the uninterrupted run"
    return pieces, firsts


def _untested(ref: dict[str, Any]) -> list[str]:
    keys = set(ref.get("keys", []))
    out = []
    if ref.get("mode") != "user save/load":
        out.append(
            "your checkpoint code: the runner saved and restored the full state_dicts itself, which proves only "
            "that the objects CAN be restored; return `save` and `load` (your project's own functions) from the "
            "entrypoint to test what your checkpoints really hold"
        )
    if "next_batch" not in keys:
        out.append(
            "dataloader position: the runner fed `batch`/`batches` itself; return `next_batch` (your data stream) "
            "to test yours"
        )
    if "scheduler" not in keys and "step_fn" not in keys:
        out.append("LR scheduler: the entrypoint returns no `scheduler`")
    if "scaler" not in keys and "step_fn" not in keys:
        out.append("grad scaler: the entrypoint returns no `scaler`")
    if "ema" not in keys:
        out.append("EMA weights: the entrypoint returns no `ema`")
    if "step_fn" in keys and "optimizer" not in keys:
        out.append(
            "optimizer state: `step_fn` without `optimizer`; return the optimizer too so its state is compared"
        )
    return out


def _piece_step(piece: str, firsts: dict[str, int | None], n: int) -> int | None:
    """Where training first shows a missing piece."""
    if piece == "data":
        return firsts["batch"]
    if piece in ("scheduler", "optimizer_groups"):
        return firsts["lr"] or firsts["model"] or firsts["loss"]
    if piece in ("optimizer_state", "scaler"):
        return firsts["model"] or firsts["loss"]
    if piece == "rng":
        return firsts["loss"] or firsts["model"]
    return firsts["loss"] or firsts["model"]


def build_report(
    entrypoint: str,
    interpreter: str,
    ref: dict[str, Any],
    res: dict[str, Any],
    n: int,
    m: int,
    control: dict[str, Any] | None = None,
) -> ResumeReport:
    pieces, firsts = analyse(ref, res, n)
    trained_differs = any(firsts[k] is not None for k in ("loss", "model"))
    report = ResumeReport(
        entrypoint=entrypoint,
        interpreter=interpreter,
        mode=str(ref.get("mode")),
        steps_before=n,
        steps_after=m,
        verdict="restored",
        healthy=True,
        untested=_untested(ref),
    )
    by_step = {s["step"]: s for s in ref["steps"]}
    report.steps = [
        StepPair(
            step=int(s["step"]),
            loss_reference=by_step.get(s["step"], {}).get("loss"),
            loss_resumed=s.get("loss"),
        )
        for s in res["steps"]
    ]
    visible = [(k, v) for k, v in firsts.items() if v is not None]
    if visible:
        what, first_at = min(
            visible, key=lambda kv: (kv[1], ["batch", "lr", "loss", "model", "optimizer"].index(kv[0]))
        )
        label = {"batch": "the batch", "lr": "the learning rate", "loss": "the loss", "model": "the weights after the step",
                 "optimizer": "the optimizer state after the step"}[what]  # fmt: skip
        report.first_divergence = f"{label} at step {first_at}"
    if not _same(ref["init"]["model"], res["init"]["model"]):
        report.notes.append(
            "the entrypoint built different initial weights in the two processes despite the same seed; "
            "harmless when the checkpoint restores the weights"
        )
    order = [
        "data",
        "scheduler",
        "optimizer_groups",
        "optimizer_state",
        "scaler",
        "rng",
        "model",
        "buffers",
        "ema",
    ]
    for piece in sorted(pieces, key=order.index):
        label, fms = PIECES[piece]
        step = _piece_step(piece, firsts, n)
        affects = trained_differs
        report.not_restored.append(
            NotRestored(piece=label, detail=pieces[piece], affects_training=affects, first_step=step)
        )
        shows = (
            f"; training departs from the uninterrupted run ({report.first_divergence})"
            if affects
            else f"; no effect on the loss or weights within the {m} steps checked, but the state is lost"
        )
        report.findings.append(
            Finding(
                code="resume_not_restored",
                severity="error" if affects else "warning",
                message=f"The resume does not restore the {label}: {pieces[piece]}{shows}.",
                step=step,
                module=label,
                evidence={
                    "piece": piece,
                    "detail": pieces[piece],
                    "resumed_at": n,
                    "first_divergence": report.first_divergence,
                },
                failure_modes=fms,
            )
        )
    if pieces:
        report.verdict = "not_restored"
        report.healthy = False
    elif trained_differs:
        if (
            control is not None
            and _first([s for s in ref["steps"] if s["step"] > n], control["steps"], "loss") is not None
        ):
            report.verdict = "nondeterministic"
            report.notes.append(
                "two uninterrupted runs of the entrypoint already differ: training is not deterministic, so the "
                "resume cannot be judged step for step (seed every generator; torch.use_deterministic_algorithms(True))"
            )
        else:
            report.verdict = "unexplained"
            report.healthy = False
            report.findings.append(
                Finding(
                    code="resume_not_restored",
                    severity="error",
                    message=(
                        f"Every piece of state the check can see is restored, yet {report.first_divergence} differs "
                        "from the uninterrupted run: something outside model, optimizer, scheduler, scaler, EMA, RNG and "
                        "data position is lost (a step counter or attribute in your step code, a module attribute "
                        "that is not a buffer)."
                    ),
                    step=firsts["loss"] or firsts["model"],
                    module="state outside the saved objects",
                    evidence={"first_divergence": report.first_divergence},
                    failure_modes=["optimizer-state-not-restored"],
                )
            )
    return report


def check_resume(
    entrypoint: str,
    *,
    python: Path,
    cwd: Path,
    steps_before: int = 4,
    steps_after: int = 4,
    seed: int = 0,
    timeout_s: float = 300.0,
    memory_limit_mb: float | None = None,
    cancel_event: threading.Event | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> ResumeReport:
    """Raises ResumeError when the entrypoint cannot be run."""

    def phase(name: str, ckpt: Path, cancel: threading.Event | None) -> dict[str, Any]:
        args = [
            "--entrypoint", entrypoint, "--phase", name, "--ckpt", str(ckpt), "--steps-before",
            str(steps_before), "--steps-after", str(steps_after), "--seed", str(seed), "--wait", str(timeout_s),
        ]  # fmt: skip
        try:
            return run_runner(
                "resume_runner.py", args, python=python, cwd=cwd, timeout_s=timeout_s,
                memory_limit_mb=memory_limit_mb, cancel_event=cancel,
            ).payload  # fmt: skip
        except RunnerError as exc:
            raise ResumeError(exc.kind, f"{name} run: {exc.message}", _next_step(exc), exc.detail) from None

    total = 3
    with tempfile.TemporaryDirectory(prefix="trainsleuth-resume-") as tmp:
        ckpt = Path(tmp) / "ckpt.pt"
        if progress:
            progress(0, total, f"training {steps_before + steps_after} steps with a save after step {steps_before}; "
                     "a fresh process restores it")  # fmt: skip
        # The resumed process starts at once: it imports torch and builds the entrypoint while the
        # uninterrupted run trains, then waits for the checkpoint. It is stopped when that run fails.
        stop_resume = threading.Event()
        watcher = threading.Thread(target=_forward, args=(cancel_event, stop_resume), daemon=True)
        watcher.start()
        with ThreadPoolExecutor(max_workers=1) as pool:
            resumed = pool.submit(phase, "resume", ckpt, stop_resume)
            try:
                ref = phase("reference", ckpt, cancel_event)
            except BaseException:
                stop_resume.set()
                raise
            finally:
                if progress:
                    progress(1, total, "uninterrupted run done; waiting for the resumed one")
            try:
                res = resumed.result()
            finally:
                stop_resume.set()
        control = None
        pieces, firsts = analyse(ref, res, steps_before)
        if not pieces and (firsts["loss"] is not None or firsts["model"] is not None):
            if progress:
                progress(2, total, "training differs with every piece restored: checking determinism")
            control = phase("reference", Path(tmp) / "control.pt", cancel_event)
    if progress:
        progress(total, total, "compared")
    report = build_report(entrypoint, str(python), ref, res, steps_before, steps_after, control)
    if ref.get("notes"):
        report.notes += ref["notes"]
    if ref.get("unknown_keys"):
        report.notes.append(f"keys the contract does not know (ignored): {', '.join(ref['unknown_keys'])}")
    return report


def render_resume(report: ResumeReport) -> str:
    head = {
        "restored": "the resume restores everything checked",
        "not_restored": "the resume does not restore everything",
        "unexplained": "training departs after the resume although every piece checked is restored",
        "nondeterministic": "training is not deterministic: the resume cannot be judged step for step",
    }[report.verdict]
    if report.verdict == "restored" and report.mode != "user save/load":
        head += " by the runner's own full save, NOT by your checkpoint code (see 'Not tested')"
    lines = [
        f"check_resume ({report.mode}, save after step {report.steps_before}, {report.steps_after} steps "
        f"compared): {head}."
    ]
    for item in report.not_restored:
        when = f", visible from step {item.first_step}" if item.first_step else ""
        effect = "changes training" if item.affects_training else "no effect within the steps checked"
        lines.append(f"- not restored: {item.piece} ({item.detail}; {effect}{when})")
    if report.first_divergence:
        lines.append(f"First difference from the uninterrupted run: {report.first_divergence}.")
    if report.steps:
        lines.append(
            "Loss after the restore (uninterrupted vs resumed): "
            + ", ".join(f"{s.step}: {s.loss_reference} vs {s.loss_resumed}" for s in report.steps[:8])
        )
    lines += [f"Not tested: {u}" for u in report.untested]
    lines += [f"Note: {n}" for n in report.notes]
    return "\n".join(lines)


def _forward(source: threading.Event | None, target: threading.Event) -> None:
    """Set `target` when `source` is set (a cancelled call stops the resumed process too)."""
    if source is None:
        return
    while not target.is_set():
        if source.wait(0.2):
            target.set()
            return


def _next_step(exc: RunnerError) -> str:
    kind = exc.kind
    if kind in ("contract_error", "bad_entrypoint", "entrypoint_not_found", "function_not_found"):
        return (
            "return {'model', 'batch' or 'batches' (or 'next_batch'), 'optimizer' or 'step_fn', and optionally "
            "'scheduler', 'scaler', 'ema', 'save', 'load'} from the entrypoint function"
        )
    if kind in ("save_raised", "load_raised"):
        return "fix your save/load code (traceback above), or leave both out to test the runner's full state_dict save"
    if kind == "timeout":
        return "pass fewer steps or a larger timeout_s"
    if kind == "no_torch":
        return "pass python: the interpreter of the project's environment (with torch)"
    return "read the traceback above; the entrypoint must build and train the model without other input"
