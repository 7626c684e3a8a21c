"""Compare the ranks of an observed job: which tensor differs first, on which ranks, from when, by how much.

Each rank's observer (`runners/_ts_observe_dist.py`) wrote the digests of every tensor its models hold
(`dist-*.jsonl` in the run's output folder): when each outermost module was first called (`init`),
the gradients each optimizer applied (`grad`, step k) and every tensor at the end of step k (`step`).
Here every rank is compared with rank 0 at each point, tensor by tensor, and the first difference
of each kind becomes a `rank_divergence` finding that says whether the tensor differed from
initialisation (built, seeded or loaded differently per rank) or drifted during training (gradients
that are never all-reduced, per-rank statistics).

What legitimately differs per rank is left out and said so in the notes: buffers DDP broadcasts from
rank 0 at every forward (`broadcast_buffers=True`: judged when first seen only), tensor attributes
that change at every step on every rank (a cached batch, a metric's running sums), sharded
parameters (FSDP, DTensor: skipped by the observer), and models only some ranks call (evaluation on
rank 0).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed.divergence import WHY, common_module
from trainsleuth.tools.findings import Finding, Severity

DIGEST_GLOB = "dist-n*.jsonl"
HELLO_GLOB = "dist-hello-*.json"
# a digest: [numel, sum, sum of squares, max |x|, position-weighted sum, samples...]
N, SUM, SUMSQ, MAXABS, WSUM, SAMPLES = 0, 1, 2, 3, 4, 5
MAX_DIFFERENCES = 200
RUNNING = "running statistic"


@dataclass
class RankDigests:
    node: int
    rank: int
    pid: int
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    init: dict[str, tuple[int, list[Any]]] = field(default_factory=dict)  # name -> (step first seen, digest)
    points: dict[tuple[str, int], dict[str, list[Any]]] = field(default_factory=dict)  # (grad|step, k) -> ...
    wrappers: list[dict[str, Any]] = field(default_factory=list)
    backend: str | None = None


def read_digests(out: Path) -> list[RankDigests]:
    """Every rank's digests, rank order; a torn last line (a killed rank) is skipped."""
    ranks: list[RankDigests] = []
    hellos = _hellos(out)
    for path in sorted(out.glob(DIGEST_GLOB)):
        ident = hellos.get(path.name)
        if ident is None or not ident.get("is_rank", True):
            continue
        rd = RankDigests(
            node=int(ident.get("node", 0)), rank=int(ident.get("rank", 0)), pid=int(ident["pid"])
        )
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            point, k = rec.get("point"), int(rec.get("k") or 0)
            if point == "meta":
                rd.meta.update(rec.get("tensors") or {})
            elif point == "init":
                for name, d in (rec.get("t") or {}).items():
                    rd.init.setdefault(name, (k, d))
            elif point in ("grad", "step"):
                rd.points.setdefault((point, k), {}).update(rec.get("t") or {})
            elif point == "wrapper":
                rd.wrappers.append({k: v for k, v in rec.items() if k not in ("point", "k")})
            elif point == "job":
                rd.backend = rec.get("backend")
        ranks.append(rd)
    ranks.sort(key=lambda r: (r.rank, r.node, r.pid))
    return ranks


def _hellos(out: Path) -> dict[str, dict[str, Any]]:
    """digest file name -> the identity its process wrote at start."""
    found: dict[str, dict[str, Any]] = {}
    for path in out.glob(HELLO_GLOB):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("jsonl"):
            found[str(data["jsonl"])] = data
    return found


def read_hellos(out: Path) -> list[dict[str, Any]]:
    return sorted(_hellos(out).values(), key=lambda h: (h.get("node", 0), h.get("rank", 0), h.get("pid", 0)))


# ---------------------------------------------------------------------------- one tensor, two ranks


def _f(x: Any) -> float:
    if isinstance(x, (int, float)):
        return float(x)
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(str(x), math.nan)


@dataclass
class Gap:
    """How rank r's tensor differs from rank 0's, from their digests."""

    max_abs_diff: float  # over the sampled elements (a lower bound of the true max |Δ|)
    rel_diff: float  # relative to rank 0's max |x| (or the change of norm, when larger)
    norm_0: float
    norm_r: float
    shape_differs: bool = False


def compare(a: list[Any], b: list[Any], rtol: float) -> Gap | None:
    """None when the digests agree within `rtol` (relative to the tensor's scale), else the gap."""
    if not a or not b or len(a) != len(b) or a[N] != b[N]:
        return Gap(math.nan, math.nan, math.nan, math.nan, shape_differs=True)
    if a == b or a[N] == 0:
        return None
    va, vb = [_f(x) for x in a], [_f(x) for x in b]
    n = va[N]
    norm_a, norm_b = math.sqrt(max(va[SUMSQ], 0.0)), math.sqrt(max(vb[SUMSQ], 0.0))
    if not all(map(math.isfinite, va + vb)):
        return Gap(math.inf, math.inf, norm_a, norm_b)  # NaN/Inf on one rank, or in different places
    scale = max(abs(va[MAXABS]), abs(vb[MAXABS]), 1e-30)
    sample_gap = max((abs(x - y) for x, y in zip(va[SAMPLES:], vb[SAMPLES:], strict=True)), default=0.0)
    gaps = [
        sample_gap / scale,
        abs(va[MAXABS] - vb[MAXABS]) / scale,
        abs(norm_a - norm_b) / max(norm_a, norm_b, 1e-30),
        abs(va[SUM] - vb[SUM]) / (scale * math.sqrt(n)),
        abs(va[WSUM] - vb[WSUM]) / (scale * math.sqrt(n)),
    ]
    if max(gaps) <= rtol:
        return None
    max_abs = max(sample_gap, abs(va[MAXABS] - vb[MAXABS]))
    rel = max(max_abs / max(abs(va[MAXABS]), 1e-30), gaps[2])
    return Gap(max_abs, rel, norm_a, norm_b)


# ---------------------------------------------------------------------------- the whole job


@dataclass
class Divergence:
    name: str
    kind: str  # parameter, frozen parameter, buffer, attribute, gradient
    module: str | None
    origin: str  # initialisation | training
    point: str  # init | grad | step
    step: int
    ranks: list[int]
    gap: Gap
    in_ddp: bool | None


@dataclass
class Comparison:
    divergences: list[Divergence] = field(default_factory=list)
    compared_tensors: int = 0
    compared_points: int = 0
    notes: list[str] = field(default_factory=list)
    per_step_only: list[str] = field(default_factory=list)  # attributes changing every step: not judged


def _order(point: str, k: int) -> tuple[int, int]:
    return (k, 0 if point == "grad" else 1)


def compare_ranks(ranks: list[RankDigests], rtol: float) -> Comparison:
    """Every rank against rank 0: the first point at which each tensor differs, and on which ranks."""
    out = Comparison()
    if len(ranks) < 2:
        return out
    ref, others = ranks[0], ranks[1:]
    meta = ref.meta
    out.compared_tensors = len(meta)
    changing = _changing_every_step(ref)
    first: dict[str, Divergence] = {}
    # initialisation: when each model was first called (the same step on both ranks, else not comparable)
    for name, (k0, d0) in ref.init.items():
        for other in others:
            got = other.init.get(name)
            if got is None or got[0] != k0:
                continue
            gap = compare(d0, got[1], rtol)
            if gap is not None:
                m = meta.get(name, {})
                _add(first, name, m, "init", k0, other.rank, gap, _running(m, name, changing, k0 > 1))
    synced = {n for n, m in meta.items() if m.get("synced_each_forward")}
    for point, k in sorted(ref.points, key=lambda pk: _order(*pk)):
        out.compared_points += 1
        digests = ref.points[(point, k)]
        for other in others:
            theirs = other.points.get((point, k))
            if theirs is None:
                continue
            for name, d0 in digests.items():
                if point == "step" and name in synced:
                    continue  # DDP broadcasts it from rank 0 at the next forward
                d1 = theirs.get(name)
                if d1 is None:
                    continue
                gap = compare(d0, d1, rtol)
                if gap is None:
                    continue
                m = meta.get(name, {})
                if m.get("kind") == "attribute" and name in changing and f"attribute:{name}" not in first:
                    if name not in out.per_step_only:
                        out.per_step_only.append(name)
                    continue
                _add(first, name, m, point, k, other.rank, gap, _running(m, name, changing, point == "step"))
    order = {name: i for i, name in enumerate(meta)}
    # a parameter that drifts because its gradient differed is the gradient's consequence, not a second cause
    grads = {d.name: d for d in first.values() if d.kind == "gradient"}
    kept = [
        d
        for d in first.values()
        if not (d.kind == "parameter" and d.name in grads and _chrono(grads[d.name]) <= _chrono(d))
    ]
    out.divergences = sorted(kept, key=lambda d: (_chrono(d), order.get(d.name, len(order)), d.name))
    if synced:
        out.notes.append(
            f"{len(synced)} buffer(s) inside DDP with broadcast_buffers=True are broadcast from rank 0 at every "
            "forward: compared when first seen, not after each step (they differ there by design)"
        )
    if out.per_step_only:
        out.notes.append(
            "tensor attributes that change at every step on every rank (a cached batch, a metric's running sums) "
            f"differ per rank by nature and were not judged: {', '.join(out.per_step_only[:6])}"
        )
    only = sorted(set().union(*(set(o.meta) for o in others)) ^ set(meta))
    if only:
        out.notes.append(
            f"{len(only)} tensor(s) were seen on some ranks only (a model only some ranks call, such as evaluation "
            f"on rank 0), not compared: {', '.join(only[:5])}"
        )
    return out


def _chrono(d: Divergence) -> tuple[int, int]:
    return (-1, 0) if d.point == "init" else _order(d.point, d.step)


def _running(m: dict[str, Any], name: str, changing: set[str], in_training: bool) -> str | None:
    """'running statistic' for a buffer that changes at every step and differs once training runs."""
    if not in_training or m.get("kind") != "buffer":
        return None
    return RUNNING if m.get("running") or name in changing else None


def _changing_every_step(ref: RankDigests) -> set[str]:
    """Attributes whose value on rank 0 changes between every two observed points; buffers that change at all."""
    steps = sorted(k for p, k in ref.points if p == "step")
    kinds = {n: m.get("kind") for n, m in ref.meta.items()}
    names = {n for n, k in kinds.items() if k in ("attribute", "buffer")}
    out = set()
    for name in names:
        seq = [ref.points[("step", k)].get(name) for k in steps]
        first = ref.init.get(name)
        if first is not None:
            seq.insert(0, first[1])
        seq = [s for s in seq if s is not None]
        pairs = list(itertools.pairwise(seq))
        # attributes: changed between every two points (a cached batch, running sums); buffers: changed at all
        if pairs and (
            all(a != b for a, b in pairs) or (kinds[name] == "buffer" and any(a != b for a, b in pairs))
        ):
            out.add(name)
    return out


def _add(
    first: dict[str, Divergence],
    name: str,
    m: dict[str, Any],
    point: str,
    k: int,
    rank: int,
    gap: Gap,
    kind_override: str | None = None,
) -> None:
    kind = kind_override or ("gradient" if point == "grad" else str(m.get("kind") or "parameter"))
    key = f"{kind}:{name}"
    d = first.get(key)
    if d is None:
        first[key] = Divergence(
            name=name,
            kind=kind,
            module=m.get("module"),
            origin="initialisation" if point == "init" and k <= 1 else "training",
            point=point,
            step=k,
            ranks=[rank],
            gap=gap,
            in_ddp=m.get("in_ddp"),
        )
    elif d.point == point and d.step == k and rank not in d.ranks:
        d.ranks.append(rank)
        if gap.rel_diff > d.gap.rel_diff:
            d.gap = gap


# ---------------------------------------------------------------------------- findings

KIND_WHY = {
    "parameter": WHY["parameter"],
    "frozen parameter": WHY["frozen parameter"],
    "buffer": WHY["buffer"],
    "attribute": (
        "a tensor kept as a plain attribute is neither a parameter nor a buffer, so no wrapper ever broadcasts it: "
        "build it from the same seed on every rank, or register it as a buffer before wrapping"
    ),
    RUNNING: (
        "running statistics of each rank's own batches (BatchNorm statistics, a copy of them in an EMA model, a "
        "running normaliser) differ per rank by nature and nothing synchronises them: harmless for training; "
        "evaluate and save from one rank, or all-reduce them (SyncBatchNorm on GPUs) where ranks must agree"
    ),
    "gradient": (
        "the gradient is not all-reduced: the parameter is trained outside DDP (its optimizer steps it with each "
        "rank's own gradient), so the ranks' copies of it drift apart from this step on; wrap the module that owns "
        "it in DDP (or all-reduce its gradients)"
    ),
}
OUTSIDE_WHY = (
    "neither DDP's construction broadcast nor its all-reduce ever touches state outside it: build or load it "
    "identically on every rank (the same seed before it is drawn, the same checkpoint), or broadcast it from rank 0"
)


def _when(d: Divergence) -> str:
    if d.point == "init" and d.step > 1:
        return (
            f"when {d.module or 'the model'} is first called, in step {d.step} (training had begun, so this is not "
            "its initial value)"
        )
    if d.point == "init":
        return (
            f"from initialisation: they already differ when {d.module or 'the model'} is first called "
            f"({'before step 1' if d.step <= 1 else f'in step {d.step}'})"
        )
    if d.point == "grad":
        return f"during training: equal at initialisation, the gradient differs at step {d.step}"
    return f"during training: equal at initialisation, it differs after step {d.step}"


def _severity(d: Divergence) -> Severity:
    if d.kind == RUNNING:
        return "info"
    if d.origin == "training" and d.kind in ("buffer", "attribute"):
        return "warning"
    return "error"


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "?"
    return f"{x:.3g}"


def findings(comp: Comparison, wrapped: list[str]) -> list[Finding]:
    """One `rank_divergence` per (origin, kind): the first tensor, all that differ alike, the ranks, the size."""
    groups: dict[tuple[str, str], list[Divergence]] = {}
    for d in comp.divergences:
        groups.setdefault((d.origin, d.kind), []).append(d)
    out: list[Finding] = []
    for (origin, kind), items in sorted(groups.items(), key=lambda kv: _chrono(kv[1][0])):
        d = items[0]
        names = [x.name for x in items]
        ranks = sorted({r for x in items for r in x.ranks})
        module = d.module if len(items) == 1 else (common_module(names) or d.module)
        more = f" (and {len(items) - 1} more{' in ' + module if module else ''})" if len(items) > 1 else ""
        if d.gap.shape_differs:
            size = "its shape differs"
        else:
            size = (
                f"norm {_fmt(d.gap.norm_0)} on rank 0 against {_fmt(d.gap.norm_r)}, max |Δ| at least "
                f"{_fmt(d.gap.max_abs_diff)} (relative {_fmt(d.gap.rel_diff)})"
            )
        outside = ""
        if d.in_ddp is False and wrapped and kind not in ("gradient", RUNNING):
            outside = f"; {d.module} is outside DDP (DDP wraps {', '.join(wrapped[:3])})"
        why = (
            OUTSIDE_WHY if (d.in_ddp is False and wrapped and origin == "initialisation") else KIND_WHY[kind]
        )
        label = "gradient of" if kind == "gradient" else kind
        message = (
            f"{label} {d.name}{more} differs on rank{'s' if len(ranks) > 1 else ''} "
            f"{', '.join(map(str, ranks))} from rank 0 {_when(d)}: {size}{outside}; {why}"
        )
        out.append(
            Finding(
                code="rank_divergence",
                severity=_severity(d),
                message=message,
                step=0 if d.point == "init" and d.step <= 1 else d.step,
                module=module,
                evidence={
                    "tensor": d.name,
                    "kind": kind,
                    "origin": origin,
                    "point": d.point,
                    "first_step": d.step,
                    "differing_ranks": ranks,
                    "max_abs_diff": _jsonable(d.gap.max_abs_diff),
                    "rel_diff": _jsonable(d.gap.rel_diff),
                    "norm_rank0": _jsonable(d.gap.norm_0),
                    "norm_other": _jsonable(d.gap.norm_r),
                    "in_ddp": d.in_ddp,
                    "also_differ": names[1:10],
                    "n_differ": len(items),
                },
                failure_modes=failure_modes_for("rank_divergence"),
            )
        )
    return out


def _jsonable(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def differences(comp: Comparison) -> list[dict[str, Any]]:
    """Rows for the report's `differences` (the `Difference` model of check.py)."""
    rows = []
    for d in comp.divergences[:MAX_DIFFERENCES]:
        rows.append(
            {
                "name": d.name,
                "kind": d.kind,
                "phase": "first_call"
                if d.point == "init"
                else ("before_step" if d.point == "grad" else "after_step"),
                "step": d.step,
                "rank": d.ranks[0] if d.ranks else None,
                "ranks": d.ranks,
                "max_abs_diff": _jsonable(d.gap.max_abs_diff),
                "rel_diff": _jsonable(d.gap.rel_diff),
            }
        )
    return rows
