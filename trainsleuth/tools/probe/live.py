"""Read a live-mode run folder written by `trainsleuth.probe.attach`: findings plus trends."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.probe.report import ProbeError, to_findings
from trainsleuth.tools.runners import _ts_probe_rules as rules

MAX_LINES = 200_000
TREND_POINTS = 200


class LiveRunReport(BaseModel):
    run_dir: str
    meta: dict[str, Any] = Field(default_factory=dict)
    steps_recorded: int = 0
    first_step: int | None = None
    last_step: int | None = None
    findings: list[Finding] = Field(default_factory=list)
    trends: dict[str, list[tuple[int, float | str | None]]] = Field(default_factory=dict)
    table: list[dict[str, Any]] = Field(default_factory=list)
    layer_grad_rms: list[tuple[str, float]] = Field(default_factory=list)
    skipped_lines: int = 0

    @property
    def healthy(self) -> bool:
        return all(f.severity == "info" for f in self.findings)


def _downsample(points: list[tuple[int, Any]], limit: int = TREND_POINTS) -> list[tuple[int, Any]]:
    if len(points) <= limit:
        return points
    stride = math.ceil(len(points) / limit)
    out = points[::stride]
    if out[-1] != points[-1]:
        out.append(points[-1])
    return out


def read_probe_run(run_dir: Path) -> LiveRunReport:
    """Findings and trends of a live-mode run folder; ProbeError when it is not one."""
    run_dir = Path(run_dir)
    steps_path = run_dir / "steps.jsonl"
    findings_path = run_dir / "findings.json"
    if not run_dir.is_dir():
        raise ProbeError(
            "not_a_run", f"{run_dir} is not a folder", "pass the run_dir given to trainsleuth.probe.attach"
        )
    if not steps_path.exists() and not findings_path.exists():
        raise ProbeError(
            "not_a_run",
            f"{run_dir} holds no probe run (no steps.jsonl or findings.json)",
            "pass the run_dir given to trainsleuth.probe.attach(model, optimizer, every=N, run_dir=...)",
        )
    meta: dict[str, Any] = {}
    try:
        meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    records: list[dict[str, Any]] = []
    skipped = 0
    if steps_path.exists():
        with steps_path.open(encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh):
                if i >= MAX_LINES:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    skipped += 1  # e.g. a line cut short by a crash mid-write
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("step"), int):
                    records.append(rec)
                else:
                    skipped += 1
    raw: list[dict[str, Any]] = []
    table: list[dict[str, Any]] = []
    layers: list[tuple[str, float]] = []
    if findings_path.exists():
        try:
            data = json.loads(findings_path.read_text(encoding="utf-8"))
            raw = list(data.get("findings", []))
            table = list(data.get("table", []))[:200]
            layers = [(str(n), float(v)) for n, v in data.get("layer_grad_rms", [])]
        except (OSError, ValueError, TypeError) as exc:
            raise ProbeError(
                "unreadable_run",
                f"{findings_path} is not readable JSON: {exc}",
                "let the training run write it again",
            ) from exc
    # trends over the whole run (the live findings only cover a recent window)
    losses = [(r["step"], r.get("loss")) for r in records if r.get("loss") is not None]
    norms = [(r["step"], r.get("grad_norm")) for r in records if r.get("grad_norm") is not None]
    codes = {f["code"] for f in raw}
    if "loss_diverging" not in codes and len(losses) >= 6:
        raw += rules.loss_trend([v for _, v in losses], fixed_batch=False, steps=[s for s, _ in losses])
    if "nonfinite_loss" not in codes:
        for s, v in losses:
            num = rules._num(v)
            if num is not None and not math.isfinite(num):
                raw.append(
                    rules.finding(
                        "nonfinite_loss",
                        "error",
                        f"The loss is {v} at step {s}.",
                        step=s,
                        metric="loss",
                        evidence={"loss": v},
                    )
                )
                break
    gvals = [rules._num(v) for _, v in norms]
    if "exploding_gradients" not in codes and len(gvals) >= 6 and all(v is not None for v in gvals):
        k = max(1, len(gvals) // 3)
        head = sum(v for v in gvals[:k] if v is not None) / k
        tail = sum(v for v in gvals[-k:] if v is not None) / k
        if head > 0 and math.isfinite(tail) and tail / head >= 100:
            raw.append(
                rules.finding(
                    "exploding_gradients",
                    "warning",
                    f"The gradient norm grows {tail / head:.3g}x over the run (from {head:.3g} to {tail:.3g}).",
                    step=norms[0][0],
                    metric="grad_norm",
                    evidence={"first_third_mean": head, "last_third_mean": tail, "threshold_ratio": 100},
                )
            )
    steps = [r["step"] for r in records]
    return LiveRunReport(
        run_dir=str(run_dir),
        meta=meta,
        steps_recorded=len(records),
        first_step=min(steps) if steps else None,
        last_step=max(steps) if steps else None,
        findings=to_findings(raw),
        trends={"loss": _downsample(losses), "grad_norm": _downsample(norms)},
        table=table,
        layer_grad_rms=layers,
        skipped_lines=skipped,
    )
