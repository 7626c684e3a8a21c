"""`check_distributed`: run an entrypoint under torchrun and compare ranks with each other and
with a single-process computation of the same global batch.

The work happens in `runners/dist_runner.py` inside the user's interpreter; this module launches
it and turns its per-rank measurements into findings (`rank_divergence`, `no_gradient`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed.errors import AnalysisError, from_runner_error
from trainsleuth.tools.findings import Finding, is_healthy
from trainsleuth.tools.runners.launch import RunnerError, run_runner

DDP_UNUSED_MARK = "Expected to have finished reduction"


class Difference(BaseModel):
    """One tensor that differs across ranks (or from the single-process reference)."""

    name: str
    kind: str = Field(description="parameter, frozen parameter, buffer, gradient, single-process gradient")
    phase: str = Field(description="forward_entry, after_backward, after_last_step or single_process")
    step: int | None = None
    rank: int | None = Field(default=None, description="the rank farthest from rank 0")
    max_abs_diff: float | str | None = None
    rel_diff: float | str | None = None


class DistributedReport(BaseModel):
    entrypoint: str
    healthy: bool
    world_size: int
    backend: str | None = None
    wrapper: str | None = None
    sharding: str | None = None
    steps_taken: int = 0
    losses_by_step: list[list[float]] = Field(default_factory=list, description="per step, one loss per rank")
    single_process: dict[str, Any] | None = None
    differences: list[Difference] = Field(default_factory=list)
    unused_parameters: dict[str, list[str]] = Field(
        default_factory=dict, description="rank -> parameters with requires_grad=True that got no gradient"
    )
    frozen_parameters: list[str] = Field(default_factory=list)
    step_errors: dict[str, str] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    interpreter: str = ""
    duration_s: float = 0.0

    def render_text(self) -> str:
        lines = [
            f"check_distributed {self.entrypoint}: {'HEALTHY' if self.healthy else 'PROBLEMS FOUND'} "
            f"({self.world_size} ranks, {self.backend}, {self.steps_taken} step(s), {self.duration_s:.1f}s)",
            f"wrapper: {self.wrapper}; {self.sharding}",
        ]
        if self.single_process:
            sp = self.single_process
            lines.append(
                f"single process vs {self.world_size} ranks, step 1: loss {sp.get('loss_single')} vs "
                f"{sp.get('loss_multi')} (rel diff {sp.get('loss_rel_diff')}); "
                f"{len(sp.get('grad_mismatches') or [])} of {sp.get('grads_compared')} gradients beyond rtol "
                f"{sp.get('rtol')}"
            )
        for f in self.findings:
            lines.append(f.one_line())
        if self.differences:
            lines.append("differences (first 15):")
            for d in self.differences[:15]:
                lines.append(
                    f"  {d.kind} {d.name} [{d.phase}, step {d.step}] rank {d.rank}: "
                    f"max|Δ| {d.max_abs_diff}, rel {d.rel_diff}"
                )
        for rank, err in self.step_errors.items():
            lines.append(f"rank {rank} failed: {err[:400]}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _module_of(name: str) -> str | None:
    return name.rpartition(".")[0] or None


def _f(x: Any) -> float | str | None:
    return x if isinstance(x, (int, float, str)) or x is None else str(x)


def build_report(payload: dict[str, Any], entrypoint: str) -> DistributedReport:
    """Turn the runner's merged per-rank payload into differences and findings."""
    summary = payload.get("summary") or {}
    world = int(payload.get("nproc") or summary.get("world_size") or 0)
    report = DistributedReport(
        entrypoint=entrypoint,
        healthy=True,
        world_size=world,
        backend=summary.get("backend"),
        wrapper=summary.get("wrapper"),
        sharding=summary.get("sharding"),
        steps_taken=int(summary.get("steps_taken") or 0),
        losses_by_step=summary.get("losses") or [],
        single_process=summary.get("single_process"),
        frozen_parameters=list(summary.get("frozen_params") or []),
        notes=list(summary.get("notes") or []),
        duration_s=float(payload.get("duration_s") or 0.0),
    )
    frozen = set(report.frozen_parameters)
    findings: list[Finding] = []

    if payload.get("timed_out"):
        missing = [r.get("rank") for r in payload.get("ranks", []) if r.get("missing")]
        raise AnalysisError(
            "the distributed run did not finish in time and was killed with all its ranks"
            + (f" (ranks without a report: {missing})" if missing else "")
            + f". Output tail:\n{str(payload.get('log_tail', ''))[-1500:]}",
            "a rank may be blocked in a collective: run the job yourself and call dump_stacks while it "
            "hangs, or raise timeout_s",
        )
    if not summary:
        errors = [r.get("error") for r in payload.get("ranks", []) if r.get("error")]
        message = errors[0].get("message") if errors else "no rank wrote a report"
        raise AnalysisError(
            f"the distributed run failed before it could be checked: {message}\n"
            f"{str(payload.get('log_tail', ''))[-2000:]}",
            "run the entrypoint under torchrun yourself to see the full error, fix it, and retry",
        )

    for rank, err in (summary.get("step_errors") or {}).items():
        report.step_errors[str(rank)] = str(err.get("message", err))

    # ---- structure: ranks that build different models cannot be compared value by value
    comparisons = summary.get("comparisons") or []
    for comp in comparisons:
        mismatch = comp.get("structure_mismatch")
        if mismatch:
            findings.append(
                Finding(
                    code="rank_divergence",
                    severity="error",
                    message=(
                        f"rank {mismatch.get('rank')} has a different set of {comp.get('kind')}s (names, shapes "
                        f"or dtypes) than rank 0 at {comp.get('phase')} of step {comp.get('step')}: the ranks "
                        "do not build the same model"
                    ),
                    step=comp.get("step"),
                    evidence={
                        "kind": "structure",
                        "detail": mismatch.get("detail"),
                        "phase": comp.get("phase"),
                    },
                    failure_modes=failure_modes_for("rank_divergence"),
                )
            )
            break

    # ---- value differences across ranks, grouped by kind; the first of each kind is reported
    first_by_kind: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    names_by_kind: dict[str, list[str]] = {}
    for comp in comparisons:
        for row in comp.get("rows") or []:
            kind = comp.get("kind", "parameter")
            if kind == "parameter" and (row["name"] in frozen or not row.get("requires_grad", True)):
                kind = "frozen parameter"
            diff = Difference(
                name=row["name"],
                kind=kind,
                phase=comp.get("phase", ""),
                step=comp.get("step"),
                rank=row.get("rank"),
                max_abs_diff=_f(row.get("max_abs_diff")),
                rel_diff=_f(row.get("rel_diff")),
            )
            report.differences.append(diff)
            first_by_kind.setdefault(kind, (comp, row))
            seen = names_by_kind.setdefault(kind, [])
            if row["name"] not in seen:
                seen.append(row["name"])
    for kind in ("frozen parameter", "buffer", "gradient", "parameter"):
        if kind not in first_by_kind:
            continue
        comp, row = first_by_kind[kind]
        name = row["name"]
        where = f"at the start of step {comp.get('step')}'s forward"
        if comp.get("phase") == "after_backward":
            where = f"after backward of step {comp.get('step')}"
        elif comp.get("phase") == "after_last_step":
            where = f"after optimizer step {comp.get('step')}"
        others = [n for n in names_by_kind[kind] if n != name]
        size = f"max |Δ| = {row.get('max_abs_diff')}, relative {row.get('rel_diff')}"
        why = {
            "frozen parameter": (
                "DDP broadcasts weights once, at construction, and never synchronises frozen ones: load "
                "pretrained weights (or seed) identically on every rank before wrapping"
            ),
            "buffer": (
                "buffers (e.g. BatchNorm running statistics) are not synchronised: DDP with "
                "broadcast_buffers=False or a custom wrapper; use SyncBatchNorm or broadcast buffers, or "
                "evaluation differs per rank"
            ),
            "gradient": (
                "gradients were not all-reduced consistently (parameters without gradients keep DDP's "
                "bucket from being reduced, or a custom wrapper skips some)"
            ),
            "parameter": (
                "ranks start from or step to different weights: check initialisation, loading and that "
                "every gradient is all-reduced"
            ),
        }[kind]
        findings.append(
            Finding(
                code="rank_divergence",
                severity="error",
                message=f"{kind} {name} differs across ranks {where} (rank {row.get('rank')}, {size}); {why}",
                step=comp.get("step"),
                module=_module_of(name),
                evidence={
                    "tensor": name,
                    "kind": kind,
                    "phase": comp.get("phase"),
                    "rank": row.get("rank"),
                    "differing_ranks": row.get("differing_ranks"),
                    "max_abs_diff": row.get("max_abs_diff"),
                    "rel_diff": row.get("rel_diff"),
                    "rank0_max_abs": row.get("ref_max_abs"),
                    "also_differ": others[:10],
                    "n_differ": len(names_by_kind[kind]),
                },
                failure_modes=failure_modes_for("rank_divergence"),
            )
        )

    # ---- parameters that never receive a gradient (DDP unused parameters)
    unused_by_rank = summary.get("unused_by_rank") or []
    for r, names in enumerate(unused_by_rank):
        if names:
            report.unused_parameters[str(r)] = list(names)
    if report.unused_parameters:
        all_names: list[str] = []
        for names in report.unused_parameters.values():
            all_names.extend(n for n in names if n not in all_names)
        ddp_error = next((e for e in report.step_errors.values() if DDP_UNUSED_MARK in e), None)
        same_everywhere = len({tuple(v) for v in report.unused_parameters.values()}) == 1 and len(
            report.unused_parameters
        ) == len(unused_by_rank)
        module = _common_module(all_names)
        findings.append(
            Finding(
                code="no_gradient",
                severity="error",
                message=(
                    f"{len(all_names)} parameter(s) with requires_grad=True get no gradient "
                    f"({', '.join(all_names[:4])}{', ...' if len(all_names) > 4 else ''}); DDP without "
                    "find_unused_parameters=True never reduces their bucket"
                    + (" and the next iteration fails" if ddp_error else "")
                    + ": use them in the loss, freeze them (requires_grad_(False)) before wrapping, or pass "
                    "find_unused_parameters=True"
                ),
                step=1,
                module=module,
                evidence={
                    "parameters": all_names[:50],
                    "by_rank": report.unused_parameters,
                    "same_on_every_rank": same_everywhere,
                    "ddp_error": ddp_error[:600] if ddp_error else None,
                },
                failure_modes=failure_modes_for("no_gradient"),
            )
        )

    # ---- single process vs multi-process on the same global batch
    sp = report.single_process
    if sp:
        rtol = float(sp.get("rtol") or 1e-4)
        loss_rel = sp.get("loss_rel_diff")
        loss_bad = not isinstance(loss_rel, (int, float)) or loss_rel > rtol
        mismatches = sp.get("grad_mismatches") or []
        for row in mismatches:
            report.differences.append(
                Difference(
                    name=row["name"],
                    kind="single-process gradient",
                    phase="single_process",
                    step=1,
                    max_abs_diff=_f(row.get("max_abs_diff")),
                    rel_diff=_f(row.get("rel_diff")),
                )
            )
        if loss_bad or mismatches:
            first = mismatches[0] if mismatches else None
            what = (
                f"the gradient of {first['name']} differs by relative {first.get('rel_diff')}"
                if first
                else f"the loss differs by relative {loss_rel}"
            )
            findings.append(
                Finding(
                    code="rank_divergence",
                    severity="error",
                    message=(
                        f"step 1 on {world} ranks does not match a single process on the same global batch: "
                        f"{what} (rtol {rtol:g}); the averaged gradients are not what one process computes"
                    ),
                    step=1,
                    module=_module_of(first["name"]) if first else None,
                    metric=None if first else "loss",
                    evidence={
                        "kind": "single-process",
                        "loss_single": sp.get("loss_single"),
                        "loss_multi": sp.get("loss_multi"),
                        "loss_rel_diff": loss_rel,
                        "grad_mismatches": mismatches[:10],
                        "grads_compared": sp.get("grads_compared"),
                        "rtol": rtol,
                    },
                    failure_modes=failure_modes_for("rank_divergence"),
                )
            )
    if report.step_errors and not any(DDP_UNUSED_MARK in e for e in report.step_errors.values()):
        report.notes.append(
            f"the run stopped at a failing step on rank(s) {sorted(report.step_errors)}; checks cover the steps "
            "before it"
        )
    # The missing gradient is the cause of the divergence it produces, so it goes first.
    findings.sort(key=lambda f: 0 if f.code == "no_gradient" else 1)
    report.findings = findings
    report.healthy = is_healthy(findings) and not report.step_errors
    return report


def _common_module(names: list[str]) -> str | None:
    parts = [n.split(".")[:-1] for n in names]
    if not parts:
        return None
    prefix = parts[0]
    for p in parts[1:]:
        i = 0
        while i < min(len(prefix), len(p)) and prefix[i] == p[i]:
            i += 1
        prefix = prefix[:i]
    return ".".join(prefix) or None


def check_distributed(
    entrypoint: str,
    *,
    python: Path,
    cwd: Path,
    nproc: int = 2,
    steps: int = 2,
    backend: str = "auto",
    rtol: float = 1e-4,
    rank_rtol: float = 1e-6,
    timeout_s: float = 240.0,
    cancel_event: threading.Event | None = None,
) -> DistributedReport:
    args = [
        "--entrypoint",
        entrypoint,
        "--nproc",
        str(nproc),
        "--steps",
        str(steps),
        "--backend",
        backend,
        "--rtol",
        repr(rtol),
        "--rank-rtol",
        repr(rank_rtol),
        "--timeout",
        repr(timeout_s),
    ]
    try:
        outcome = run_runner(
            "dist_runner.py",
            args,
            python=python,
            cwd=cwd,
            timeout_s=timeout_s + 60,
            cancel_event=cancel_event,
        )
    except RunnerError as exc:
        raise from_runner_error(exc, "check_distributed") from None
    report = build_report(outcome.payload, entrypoint)
    report.interpreter = str(python)
    return report
