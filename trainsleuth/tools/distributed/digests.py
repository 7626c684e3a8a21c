"""Compare what every rank of an observed command held: the digests `runners/_ts_observe_dist.py` wrote.

Each rank's `dist-<tag>.jsonl` lists, at each point in time (`first_use` of a module, `after_step`
k), a digest of every parameter, buffer and plain tensor attribute of the modules that ran. Here the
ranks meet: every tensor is compared with the lowest rank's at the same point; the first point where
it differs says whether it differs *from initialisation* (at its first snapshot: built, seeded or
loaded differently) or *drifts during training* (equal at first, different after step k).

Tensors that legitimately differ per rank are listed, not judged: shards (FSDP, DTensor), buffers
DDP copies from rank 0 at every forward (`broadcast_buffers=True`) between two forwards, random
generator states, integer tensors that hold a rank's data order (sampler permutations, indices), and
attributes a forward replaces every time (activation caches).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed.divergence import WHY, common_module, module_of
from trainsleuth.tools.findings import Finding, Severity

DIGEST_PREFIX = "dist-"
STATS = 4  # sum, L1, L2, max |x|; the samples follow
RNG_NAME = re.compile(r"(rng|generator|seed|random_state)", re.I)
DATA_ORDER_NAME = re.compile(r"(sampler|indices|index|perm|shuffle|order|rank|local)", re.I)
RNG_STATE_NUMEL = (5056, 16)  # torch's CPU and CUDA generator states (uint8)
RUNNING_STATS = ("running_mean", "running_var", "num_batches_tracked")

WHY_OUTSIDE = (
    "this state lives outside the wrapped model (a frozen feature extractor, a teacher, a scaler or "
    "normaliser, precomputed tables), so neither DDP's construction broadcast nor its all-reduce ever touches "
    "it: build, fit or load it identically on every rank (same seed, same data, same checkpoint), or "
    "broadcast it from rank 0"
)
WHY_ATTRIBUTE = (
    "a plain tensor attribute (not a parameter or buffer) is never touched by DDP's broadcasts or "
    "all-reduces: compute it identically on every rank (same seed, same data, or from the global batch)"
)
DRIFT_WHY = {
    "parameter_ddp": (
        "DDP keeps the weights it wraps equal only when every rank applies the same averaged gradient: a "
        "rank stepped with its own gradients (no_sync() around every micro-step, a per-rank optimizer, "
        "clipping or an in-place update of .data on one rank)"
    ),
    "parameter": (
        "it is trained outside DDP, so each rank steps it with its own gradients and nothing averages them: "
        "wrap it in DDP (or all-reduce its gradients)"
    ),
    "state": (
        "it is updated in place from each rank's own batch (running statistics, a scaler or normaliser fitted "
        "on the rank's shard) and nothing synchronises it: compute it from the global batch (all_reduce the "
        "statistics), keep the module inside DDP with broadcast_buffers, or fit it once on the same data on "
        "every rank"
    ),
    "running_stats": (
        "BatchNorm running statistics drift apart when each rank keeps its own (DDP with "
        "broadcast_buffers=False, or a BatchNorm outside DDP); evaluation then depends on the rank that saves "
        "or evaluates: use SyncBatchNorm (GPU) or broadcast_buffers=True if that matters"
    ),
}


@dataclass
class RankFile:
    """One process's digests: who it is and its snapshots in order."""

    process: dict[str, Any]
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    path: str = ""

    @property
    def rank(self) -> int:
        return int(self.process.get("rank", 0))

    @property
    def is_rank(self) -> bool:
        return bool(self.process.get("rank_env")) and not self.process.get("child")


@dataclass
class TensorDiff:
    name: str
    kind: str
    phase: str
    step: int
    origin: str  # "initialisation" or "training"
    ranks: list[int]
    max_abs_diff: float | None
    rel_diff: float | None
    ref_max_abs: float | None
    sampled: bool
    ddp: str | None
    order: tuple[int, int, int]


@dataclass
class Comparison:
    ranks: list[int] = field(default_factory=list)
    compared: int = 0  # tensors compared at least once
    points: int = 0  # (tensor, point) pairs compared
    diffs: list[TensorDiff] = field(default_factory=list)
    by_design: list[str] = field(default_factory=list)
    only_on_some: list[str] = field(default_factory=list)
    structure: list[str] = field(default_factory=list)
    outside_ddp: list[str] = field(default_factory=list)
    ddp: list[dict[str, Any]] = field(default_factory=list)
    backend: str | None = None
    roots: list[str] = field(default_factory=list)  # the modules' labels, as the user's code names them
    notes: list[str] = field(default_factory=list)

    def root_of(self, name: str) -> str:
        """The label of the module a tensor name starts with (`model.features` for `model.features.w`)."""
        best = ""
        for label in self.roots:
            if (name == label or name.startswith((label + ".", label + "["))) and len(label) > len(best):
                best = label
        return best or name.split(".")[0]


# ---------------------------------------------------------------------------- reading


def read_rank_files(out_dir: Path) -> list[RankFile]:
    """Every `dist-*.jsonl` in the run's folder; a line cut short by a kill is skipped."""
    files = []
    for path in sorted(out_dir.glob(f"{DIGEST_PREFIX}*.jsonl")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        process: dict[str, Any] | None = None
        snapshots = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "process":
                process = record
            elif record.get("type") == "snapshot":
                snapshots.append(record)
        if process is not None:
            files.append(RankFile(process=process, snapshots=snapshots, path=path.name))
    return files


def training_ranks(files: list[RankFile]) -> dict[int, RankFile]:
    """rank -> the process that is that rank (the launcher and data-loader workers left out)."""
    out: dict[int, RankFile] = {}
    for f in files:
        if not f.is_rank:
            continue
        current = out.get(f.rank)
        if current is None or (len(f.snapshots) > len(current.snapshots)):
            out[f.rank] = f
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------- comparing


def _order(phase: str, step: int) -> tuple[int, int]:
    return (int(step), 0 if phase == "first_use" else 1)


def _timeline(f: RankFile) -> dict[str, dict[tuple[int, int], dict[str, Any]]]:
    """tensor name -> point -> row (a tensor's first snapshot at a point wins)."""
    out: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
    for snap in f.snapshots:
        point = _order(str(snap.get("phase")), int(snap.get("step") or 0))
        for row in snap.get("tensors") or []:
            out.setdefault(row["n"], {}).setdefault(point, row)
    return out


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _close(a: float, b: float, scale: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rtol * scale


def compare_rows(a: dict[str, Any], b: dict[str, Any], rtol: float) -> dict[str, Any] | None:
    """None when the two digests agree within rtol; else how they differ."""
    if a.get("s") != b.get("s") or a.get("d") != b.get("d"):
        return {"structure": f"{a.get('d')}{a.get('s')} against {b.get('d')}{b.get('s')}"}
    va, vb = a.get("v"), b.get("v")
    if not va or not vb or len(va) != len(vb):
        return None
    va = [_num(x) for x in va]
    vb = [_num(x) for x in vb]
    l1 = max(abs(va[1]), abs(vb[1])) if not math.isnan(va[1] + vb[1]) else math.inf
    amax = max(abs(va[3]), abs(vb[3])) if not math.isnan(va[3] + vb[3]) else math.inf
    scales = [l1, l1, max(abs(va[2]), abs(vb[2])), amax]
    same = all(_close(va[i], vb[i], scales[i], rtol) for i in range(STATS))
    samples_a, samples_b = va[STATS:], vb[STATS:]
    same = same and all(_close(x, y, amax, rtol) for x, y in zip(samples_a, samples_b, strict=True))
    if same:
        return None
    deltas = [
        abs(x - y) if not (math.isnan(x) and math.isnan(y)) else 0.0
        for x, y in zip(samples_a, samples_b, strict=True)
    ]
    deltas = [d if not math.isnan(d) else math.inf for d in deltas]
    max_abs = max([*deltas, abs(va[3] - vb[3]) if math.isfinite(va[3] - vb[3]) else math.inf], default=0.0)
    ref_norm = math.sqrt(sum(x * x for x in samples_a if math.isfinite(x)))
    diff_norm = math.sqrt(sum(d * d for d in deltas)) if all(math.isfinite(d) for d in deltas) else math.inf
    if ref_norm > 0 and diff_norm > 0:
        rel = diff_norm / ref_norm
    elif va[2] > 0:
        rel = abs(va[2] - vb[2]) / va[2] if math.isfinite(va[2] - vb[2]) else math.inf
    else:
        rel = math.inf
    return {"max_abs_diff": max_abs, "rel_diff": rel, "ref_max_abs": va[3]}


def _last(name: str) -> str:
    return re.split(r"[.\[]", name.rstrip("]"))[-1]


def by_design(name: str, row: dict[str, Any]) -> str | None:
    """Why this tensor may differ per rank without a bug, judged from its name, type and flags; else None."""
    flags = row.get("f") or {}
    if flags.get("sharded"):
        return "a shard (FSDP / DTensor): each rank holds its own part"
    last = _last(name)
    dtype = str(row.get("d") or "")
    numel = math.prod(row.get("s") or [1])
    if RNG_NAME.search(last) or (dtype == "uint8" and numel in RNG_STATE_NUMEL):
        return "a random generator state (per rank by design)"
    integer = dtype.startswith(("int", "uint", "bool"))
    if integer and DATA_ORDER_NAME.search(last):
        return "integers holding the rank's data order (sampler, indices)"
    return None


def compare_ranks(files: list[RankFile], rtol: float) -> Comparison:
    """Every tensor of every rank against the lowest rank's, point by point."""
    ranks = training_ranks(files)
    result = Comparison(ranks=list(ranks))
    for f in ranks.values():
        for snap in f.snapshots:
            if snap.get("backend") and result.backend is None:
                result.backend = str(snap["backend"])
            if snap.get("phase") == "after_step" and snap.get("ddp") and not result.ddp:
                result.ddp = list(snap["ddp"])
    if len(ranks) < 2:
        return result
    timelines = {r: _timeline(f) for r, f in ranks.items()}
    ref_rank = min(ranks)
    ref = timelines[ref_rank]
    every: dict[str, list[int]] = {}
    for r, tl in timelines.items():
        for name in tl:
            every.setdefault(name, []).append(r)
    names_everywhere = {n for n, holders in every.items() if len(holders) == len(timelines)}
    for name, holders in every.items():
        if len(holders) < len(timelines) and len(result.only_on_some) < 20:
            result.only_on_some.append(f"{name} (only on rank{'s' if len(holders) > 1 else ''} {holders})")
    for f in ranks.values():
        for snap in f.snapshots:
            for label in snap.get("roots") or []:
                if label not in result.roots:
                    result.roots.append(label)
    position = {name: i for i, name in enumerate(ref)}
    outside: list[str] = []
    for name in sorted(names_everywhere, key=lambda n: position.get(n, 0)):
        points = sorted(set.intersection(*(set(tl[name]) for tl in timelines.values())))
        if not points:
            continue
        result.compared += 1
        first_row = ref[name][points[0]]
        flags = first_row.get("f") or {}
        if not flags.get("ddp"):
            root = result.root_of(name)
            if root not in outside:
                outside.append(root)
        excuse = by_design(name, first_row)
        cache = _is_cache(name, ref)
        for i, point in enumerate(points):
            differing: list[int] = []
            worst: dict[str, Any] | None = None
            for r, tl in timelines.items():
                if r == ref_rank:
                    continue
                result.points += 1
                diff = compare_rows(ref[name][point], tl[name][point], rtol)
                if diff is None:
                    continue
                if "structure" in diff:
                    text = f"{name}: rank {ref_rank} {diff['structure']} on rank {r}"
                    if text not in result.structure:
                        result.structure.append(text)
                    continue
                differing.append(r)
                if worst is None or _num(diff["max_abs_diff"]) > _num(worst["max_abs_diff"]):
                    worst = diff
            if not differing or worst is None:
                continue
            row = ref[name][point]
            kind = str(row.get("k"))
            phase = "first_use" if point[1] == 0 else "after_step"
            why_not = excuse or cache
            if why_not is None and (row.get("f") or {}).get("rebroadcast") and phase == "after_step":
                why_not = "a buffer DDP copies from rank 0 at every forward (broadcast_buffers=True)"
            if why_not is not None:
                result.by_design.append(f"{name}: {why_not}")
                break
            numel = math.prod(row.get("s") or [1])
            result.diffs.append(
                TensorDiff(
                    name=name,
                    kind=kind,
                    phase=phase,
                    step=point[0],
                    # first seen once training had begun (an EMA copy, a metric first called after step 1):
                    # its first value is not an initial one
                    origin="initialisation" if i == 0 and point[0] <= 1 else "training",
                    ranks=differing,
                    max_abs_diff=_num(worst["max_abs_diff"]),
                    rel_diff=_num(worst["rel_diff"]),
                    ref_max_abs=_num(worst["ref_max_abs"]),
                    sampled=numel > len(row.get("v") or []) - STATS,
                    ddp=flags.get("ddp"),
                    order=(point[0], point[1], position.get(name, 0)),
                )
            )
            break
    result.outside_ddp = outside if result.ddp else []
    result.diffs.sort(key=lambda d: d.order)
    return result


def _is_cache(name: str, timeline: dict[str, dict[tuple[int, int], dict[str, Any]]]) -> str | None:
    """An attribute the forward sets anew every time (an activation cache), judged on the reference rank."""
    rows = [timeline[name][p] for p in sorted(timeline.get(name, {}))]
    if not rows or rows[0].get("k") != "attribute":
        return None
    flags = [r.get("f") or {} for r in rows]
    if any(f.get("activation") for f in flags):
        return "an activation kept by the forward (it carries autograd history): per-rank data"
    later = flags[1:]
    if later and all(f.get("replaced") for f in later):
        return "an attribute the forward replaces at every step (a cache of the rank's own batch)"
    return None


# ---------------------------------------------------------------------------- findings


def _kind_label(d: TensorDiff) -> str:
    return {"attribute": "tensor attribute"}.get(d.kind, d.kind)


def _when(d: TensorDiff) -> str:
    if d.phase == "first_use" and d.origin == "training":
        return f"when first used, in step {d.step} (training had begun, so not an initial value)"
    if d.phase == "first_use":
        return f"from initialisation: already before the first forward of step {d.step}"
    if d.origin == "initialisation":
        return f"from the first time it was seen (after step {d.step})"
    return f"from step {d.step} (equal before it): it drifts during training"


def _why(d: TensorDiff, outside_note: str | None) -> tuple[str, Severity]:
    if d.origin == "initialisation":
        if d.ddp is None and d.kind != "attribute":
            base = WHY_OUTSIDE
        elif d.kind == "attribute":
            base = WHY_ATTRIBUTE
        else:
            base = WHY.get(d.kind, WHY["parameter"])
        return (f"{outside_note}; {base}" if outside_note else base), "error"
    last = _last(d.name)
    if d.kind == "buffer" and last in RUNNING_STATS:
        return DRIFT_WHY["running_stats"], "warning"
    if d.kind == "parameter":
        return DRIFT_WHY["parameter_ddp" if d.ddp else "parameter"], "error"
    return DRIFT_WHY["state"], "error"


def _outside_note(d: TensorDiff, comp: Comparison) -> str | None:
    if d.ddp is not None or not comp.ddp:
        return None
    wrapped = [str(w.get("module")) for w in comp.ddp]
    root = comp.root_of(d.name)
    owner = module_of(d.name) or root
    return (
        f"{owner} is outside DDP (DDP wraps only {', '.join(wrapped)}), so nothing ever synchronises it "
        f"across ranks"
        if root not in wrapped
        else None
    )


def findings(comp: Comparison) -> tuple[list[Finding], str | None]:
    """rank_divergence findings, one per module and origin (initialisation or training), earliest first; and
    the first divergence."""
    groups: dict[tuple[str, str], list[TensorDiff]] = {}
    for d in comp.diffs:
        key = (d.origin, comp.root_of(d.name))
        groups.setdefault(key, []).append(d)
    out: list[Finding] = []
    for (origin, _root), diffs in sorted(groups.items(), key=lambda kv: kv[1][0].order):
        d = diffs[0]
        names = [x.name for x in diffs]
        module = common_module(names) if len(names) > 1 else module_of(d.name)
        ranks = sorted({r for x in diffs for r in x.ranks})
        others = names[1:]
        more = f" (and {len(others)} more{' in ' + module if module else ''})" if others else ""
        why, severity = _why(d, _outside_note(d, comp))
        sampled = " over 64 sampled elements" if d.sampled else ""
        message = (
            f"{_kind_label(d)} {d.name}{more} differs on rank{'s' if len(ranks) > 1 else ''} "
            f"{', '.join(map(str, ranks))} from rank {min(comp.ranks)} {_when(d)} (max |Δ| "
            f"{_fmt(d.max_abs_diff)}{sampled}, relative {_fmt(d.rel_diff)}, rank {min(comp.ranks)}'s max |x| "
            f"{_fmt(d.ref_max_abs)}); {why}"
        )
        out.append(
            Finding(
                code="rank_divergence",
                severity=severity,
                message=message,
                step=d.step,
                module=module,
                evidence={
                    "tensor": d.name,
                    "kind": d.kind,
                    "origin": origin,
                    "phase": d.phase,
                    "first_step": d.step,
                    "differing_ranks": ranks,
                    "reference_rank": min(comp.ranks),
                    "max_abs_diff": d.max_abs_diff,
                    "rel_diff": d.rel_diff,
                    "ref_max_abs": d.ref_max_abs,
                    "max_abs_over_samples": d.sampled,
                    "inside_ddp": d.ddp,
                    "also_differ": others[:10],
                    "n_differ": len(names),
                },
                failure_modes=failure_modes_for("rank_divergence"),
            )
        )
    first = None
    if comp.diffs:
        d = comp.diffs[0]
        first = f"{_kind_label(d)} {d.name} on rank(s) {d.ranks}, {_when(d)}"
    return out, first


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "?"
    return f"{x:.3g}"
