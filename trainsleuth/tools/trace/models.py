"""The trace_diff report: the first difference that matters, the next ones, broken invariants, noise."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from trainsleuth.tools.findings import Finding

DiffCode = Literal["call_missing", "call_order", "call_args", "update_lost", "trace_divergence"]


class Difference(BaseModel):
    code: DiffCode
    step: int
    before_training: bool = False
    rank: int | None = None
    what: str
    only_in: Literal["a", "b"] | None = None  # call_missing: the variant that has it
    site_a: str | None = None
    site_b: str | None = None
    callers_a: list[str] = Field(default_factory=list)
    callers_b: list[str] = Field(default_factory=list)
    changes: list[dict[str, Any]] = Field(default_factory=list)  # {arg, a, b}
    value_a: dict[str, Any] | None = None
    value_b: dict[str, Any] | None = None
    distance: float | None = None
    band: float | None = None
    events: int = 1  # how many events this difference stands for (a block of missing calls)
    message: str


class InvariantBreak(BaseModel):
    invariant: str
    subjects: list[str]
    step: int
    rank: int | None = None
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)


class VariantInfo(BaseModel):
    label: Literal["a", "b"]
    command: str
    rev: str | None = None
    python: str
    processes: int = 0
    ranks: list[int] = Field(default_factory=list)
    steps_observed: int = 0
    events: int = 0
    trace_bytes: int = 0
    exit_code: int | None = None
    ended: str | None = None  # steps_done | script_ended | exception | ...
    exception: str | None = None
    workspace_changes: list[str] = Field(default_factory=list)


class NoiseInfo(BaseModel):
    """The good variant run twice: how much it differs from itself."""

    measured: bool = True
    differing_events: int = 0
    unstable_events: int = 0
    max_distance: float = 0.0
    tolerance: float = 0.0
    band_factor: float = 0.0
    within_noise: int = 0  # values of b that differ from a, but inside the band


class TraceDiffReport(BaseModel):
    verdict: Literal["differs", "within_noise", "identical"]
    summary: str
    first_difference: Difference | None = None
    differences: list[Difference] = Field(default_factory=list)
    invariants: list[InvariantBreak] = Field(default_factory=list)
    noise: NoiseInfo = Field(default_factory=NoiseInfo)
    variants: list[VariantInfo] = Field(default_factory=list)
    seeds: list[dict[str, Any]] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
