"""Pull error lines out of a log: tracebacks, out-of-memory, NCCL/collective timeouts,
`minimum loss scale reached`, assertion failures, overflow/skipped-step notices."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# (kind, compiled pattern), most specific first. Patterns are matched on lines that contain
# one of the cheap trigger words below, so ordinary lines cost one `in` test.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "cuda_oom",
        re.compile(
            r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|HIP out of memory|RESOURCE_EXHAUSTED",
            re.I,
        ),
    ),
    (
        "cpu_oom",
        re.compile(
            r"\bMemoryError\b|Cannot allocate memory|oom-kill|Out of memory: Kill|Killed process|DefaultCPUAllocator: can't allocate|std::bad_alloc",
            re.I,
        ),
    ),
    (
        "nccl_timeout",
        re.compile(
            r"NCCL.*(?:timed? ?out|Timeout)|Watchdog caught collective operation timeout|ProcessGroupNCCL.*(?:timeout|Timeout)|NCCL (?:error|WARN).*(?:unhandled|remote process exited|Connection)",
            re.I,
        ),
    ),
    (
        "collective_timeout",
        re.compile(
            r"(?:collective|barrier|all_?reduce|all_?gather|broadcast|gloo).*(?:timed? ?out|timeout)|DistBackendError|socket timeout",
            re.I,
        ),
    ),
    (
        "min_loss_scale",
        re.compile(
            r"minimum loss scale reached|loss scale.*(?:minimum|min).*reached|Current loss scale already at minimum",
            re.I,
        ),
    ),
    ("assertion", re.compile(r"\bAssertionError\b|Assertion `.*` failed|assertion failed", re.I)),
    ("traceback", re.compile(r"^\s*Traceback \(most recent call last\)")),
    ("exception", re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b(?::|$)")),
    (
        "killed",
        re.compile(
            r"^\s*Killed\s*$|exited with (?:code|exit code) -?(?:9|137)\b|SIGKILL|Segmentation fault|core dumped",
            re.I,
        ),
    ),
]

_TRIGGERS = (
    "rror",
    "xception",
    "raceback",
    "emory",
    "NCCL",
    "imeout",
    "imed out",
    "ssert",
    "inimum",
    "Killed",
    "SIG",
    "Segmentation",
    "oom",
    "alloc",
    "RESOURCE",
    "core dumped",
    "xited",
)

_OVERFLOW_TRIGGERS = ("OVERFLOW", "Skipping", "skipping step", "skipped step", "overflow", "found inf")

ALL_TRIGGERS = (*_TRIGGERS, *_OVERFLOW_TRIGGERS)


# One compiled alternation is several times faster than one `in` per word on long lines
# (progress bars with block characters make Python strings wide).
_ANY_TRIGGER = re.compile("|".join(map(re.escape, ALL_TRIGGERS)))
_FAIL_TRIGGER = re.compile("|".join(map(re.escape, _TRIGGERS)))
_OVERFLOW_TRIGGER = re.compile("|".join(map(re.escape, _OVERFLOW_TRIGGERS)))


def has_trigger(line: str) -> bool:
    return _ANY_TRIGGER.search(line) is not None


def is_error_line(line: str) -> bool:
    """True when the scanner would record this line (an error or an overflow notice)."""
    if not has_trigger(line):
        return False
    return any(p.search(line) for _, p in _PATTERNS) or is_overflow(line)


_OVERFLOW_PHRASES = (
    "overflow!",
    "skipping step",
    "skipped step",
    "gradient overflow",
    "overflow detected",
    "found inf",
)
_SCALE_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def is_overflow(line: str) -> bool:
    """An fp16 overflow notice (DeepSpeed's `OVERFLOW! ... Skipping step`, Apex's `Gradient
    overflow`), matched on the lowercased line: a case-insensitive regex costs ten times more."""
    low = line.lower()
    return any(p in low for p in _OVERFLOW_PHRASES)


def next_scale(line: str) -> float | None:
    """The loss scale an fp16 overflow notice says comes next (DeepSpeed: "Attempted loss scale:
    65536, reducing to 32768"; Apex: "reducing loss scale to 1024.0"), or None."""
    low = line.lower()
    for phrase in ("reducing to ", "loss scale to "):
        i = low.find(phrase)
        if i >= 0:
            m = _SCALE_NUMBER.match(line, i + len(phrase))
            if m is not None:
                return float(m.group(0))
    return None


def trigger_positions(text: str) -> list[int]:
    """Positions of every trigger word in a block (str.find is a fast C search; a regex
    alternation of literals is not), sorted."""
    found: list[int] = []
    for word in ALL_TRIGGERS:
        pos = text.find(word)
        while pos >= 0:
            found.append(pos)
            pos = text.find(word, pos + 1)
    found.sort()
    return found


@dataclass
class ErrorHit:
    kind: str
    line_no: int
    step: float | None
    text: str
    count: int = 1
    last_line_no: int = 0
    exception: str | None = None


@dataclass
class ErrorScanner:
    """Collects error lines, grouped by kind (bounded: a few examples and a count per kind)."""

    hits: dict[str, ErrorHit] = field(default_factory=dict)
    overflow_lines: int = 0
    overflow_first_step: float | None = None
    overflow_steps: list[float] = field(default_factory=list)
    _in_traceback: bool = False
    _tb_lines: int = 0

    @property
    def in_traceback(self) -> bool:
        return self._in_traceback

    def scan(self, line: str, line_no: int, step: float | Callable[[], float | None] | None) -> str | None:
        """Look at one line. `step` may be a callable, evaluated only if the line is recorded.
        Returns what the line is: "error", "overflow" (an fp16 overflow notice) or None."""
        if self._in_traceback:
            self._tb_lines += 1
            stripped = line.strip()
            m = _PATTERNS[7][1].match(stripped) if stripped else None
            if m or self._tb_lines > 200:
                self._in_traceback = False
                tb = self.hits.get("traceback")
                if tb is not None and m and tb.exception is None:
                    tb.exception = stripped[:300]
        if _FAIL_TRIGGER.search(line) is None:
            if _OVERFLOW_TRIGGER.search(line) is not None and is_overflow(line):
                self._overflow(step)
                return "overflow"
            return None
        for kind, pat in _PATTERNS:
            if pat.search(line):
                self._add(kind, line, line_no, step)
                if kind == "traceback":
                    self._in_traceback = True
                    self._tb_lines = 0
                return "error"
        if is_overflow(line):
            self._overflow(step)
            return "overflow"
        return None

    def _overflow(self, step: float | Callable[[], float | None] | None) -> None:
        self.overflow_lines += 1
        if callable(step):
            step = step()
        if step is not None:
            if self.overflow_first_step is None:
                self.overflow_first_step = step
            if len(self.overflow_steps) < 10000:
                self.overflow_steps.append(step)

    def _add(
        self, kind: str, line: str, line_no: int, step: float | Callable[[], float | None] | None
    ) -> None:
        hit = self.hits.get(kind)
        if hit is None:
            if callable(step):
                step = step()
            self.hits[kind] = ErrorHit(kind, line_no, step, line.strip()[:300], last_line_no=line_no)
        else:
            hit.count += 1
            hit.last_line_no = line_no

    def as_list(self) -> list[dict[str, Any]]:
        return [
            {
                "kind": h.kind,
                "line": h.line_no,
                "step": h.step,
                "text": h.text,
                "count": h.count,
                "exception": h.exception,
            }
            for h in sorted(self.hits.values(), key=lambda h: h.line_no)
        ]


KIND_TEXT = {
    "cuda_oom": "GPU out of memory",
    "cpu_oom": "host (CPU) out of memory",
    "nccl_timeout": "NCCL timeout or failure",
    "collective_timeout": "collective/barrier timeout",
    "min_loss_scale": "minimum fp16 loss scale reached",
    "assertion": "assertion failure",
    "traceback": "Python traceback",
    "exception": "exception",
    "killed": "process killed or crashed",
}
