"""The finding/event record of `shared/spec/findings.md`, shared by every analysis.

The codes are a public contract: agents, CI scripts and benchmarks key on them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

Severity = Literal["error", "warning", "info"]

PROBE_CODES: frozenset[str] = frozenset(
    {
        "nonfinite_loss",
        "nonfinite_forward",
        "nonfinite_gradient",
        "exploding_gradients",
        "vanishing_gradients",
        "dead_relu",
        "saturated_activations",
        "no_gradient",
        "params_not_updated",
        "update_ratio_high",
        "update_ratio_low",
        "gradient_imbalance",
        "loss_component_imbalance",
        "grad_not_zeroed",
        "loss_not_decreasing",
        "loss_diverging",
        "input_not_normalized",
        "precision_mismatch",
        "rank_divergence",
        "collective_mismatch",
    }
)

LOG_CODES: frozenset[str] = frozenset(
    {
        "nonfinite_metric",
        "loss_spike",
        "grad_norm_spike",
        "divergence",
        "plateau",
        "constant_metric",
        "oscillation",
        "overfitting",
        "loss_scale_collapse",
        "skipped_steps",
        "throughput_drop",
        "error_message",
    }
)

# Codes added beyond the spec's tables (allowed: "add new codes freely") are listed here.
EXTRA_CODES: set[str] = {
    # probe: loss and label contract, train/eval mode, gradient accumulation (issue 17, issue 22 item 5)
    "labels_all_ignored",
    "label_out_of_range",
    "loss_input_mismatch",
    "loss_wrong_axis",
    "loss_broadcast",
    "initial_loss_off",
    "train_mode_off",
    "dropout_in_eval",
    "grad_accumulation_mismatch",
    # check_distributed (issue 19): a rank that died or raised, and a job that stopped making progress
    "rank_failed",
    "job_hung",
    # compare_runs / check_resume (issue 20)
    "run_divergence",
    "resume_not_restored",
    # analyze_training_log: the learning-rate schedule (issue 22 item 7, the agent benchmark's warmup_schedule)
    "lr_warmup_unfinished",
    # probe: regime-aware rules (issue 28): target/EMA copies, frozen teachers, KL sign, advantages
    "target_network_shared",
    "target_not_updated",
    "target_receives_gradient",
    "teacher_in_train_mode",
    "loss_term_wrong_sign",
    "advantage_not_detached",
    # trace_diff (issue 29): the first call or tensor that differs between two variants of a training
    "call_missing",
    "call_order",
    "call_args",
    "update_lost",
    "trace_divergence",
    "invariant_broken",
}

SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}


def known_codes() -> frozenset[str]:
    return PROBE_CODES | LOG_CODES | frozenset(EXTRA_CODES)


class Finding(BaseModel):
    """One thing an analysis saw. Field names follow findings.md exactly."""

    code: str
    severity: Severity
    message: str
    step: int | None = None
    module: str | None = None
    metric: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    failure_modes: list[str] = Field(default_factory=list)

    @field_validator("code")
    @classmethod
    def _known_code(cls, value: str) -> str:
        if value not in known_codes():
            raise ValueError(f"unknown finding code {value!r}; codes are fixed in shared/spec/findings.md")
        return value

    def one_line(self) -> str:
        where = []
        if self.step is not None:
            where.append(f"step {self.step}")
        if self.module:
            where.append(self.module)
        if self.metric:
            where.append(self.metric)
        loc = f" ({', '.join(where)})" if where else ""
        return f"[{self.severity}] {self.code}{loc}: {self.message}"


def is_healthy(findings: list[Finding]) -> bool:
    """A run is healthy when no record is a warning or an error (findings.md)."""
    return all(f.severity == "info" for f in findings)


def worst_severity(findings: list[Finding]) -> Severity | None:
    if not findings:
        return None
    worst = max(findings, key=lambda f: SEVERITY_RANK[f.severity])
    return worst.severity
