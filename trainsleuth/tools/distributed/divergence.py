"""Findings from one checked case: what differs across ranks, from when, and why.

Input: the summary rank 0 wrote for the case (comparisons at `before_wrap`, every
`forward_entry`, every `after_backward` and `after_last_step`; wrappers; losses; unused
parameters; the single-process replay). Output: `rank_divergence` / `no_gradient` / `rank_failed`
findings that name the module, the ranks that differ and the first step where they diverge.
"""

from __future__ import annotations

import re
from typing import Any

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.findings import Finding, Severity

DDP_UNUSED_MARK = "Expected to have finished reduction"
SYNCBN_CPU_MARKS = (
    "SyncBatchNorm layers only work with GPU modules",
    "SyncBatchNorm expected input tensor to be on GPU",
)
STATIC_GRAPH_MARK = "graph has changed"
PHASE_ORDER = {"before_wrap": 0, "forward_entry": 1, "after_backward": 2, "after_last_step": 3}
KIND_ORDER = ("outside", "frozen parameter", "buffer", "input", "gradient", "parameter")
DDP_NAMED = re.compile(r"Parameters which did not receive grad for rank (\d+): ([^\n]+)")


def module_of(name: str) -> str | None:
    base = name.split("[")[0]
    return base.rpartition(".")[0] or None


def common_module(names: list[str]) -> str | None:
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


def when(phase: str, step: int | None) -> str:
    if phase == "before_wrap":
        return "before wrapping"
    if phase == "after_backward":
        return f"after backward of step {step}"
    if phase == "after_last_step":
        return f"after optimizer step {step}"
    return f"at the start of step {step}'s forward"


def _kind(comp: dict[str, Any], row: dict[str, Any], frozen: set[str]) -> str:
    kind = str(comp.get("kind", "parameter"))
    if kind == "parameter" and (row.get("frozen") or row["name"] in frozen):
        return "frozen parameter"
    return kind


def _chrono(comp: dict[str, Any]) -> tuple[int, int]:
    step = int(comp.get("step") or 0)
    phase = PHASE_ORDER.get(str(comp.get("phase")), 1)
    if comp.get("phase") == "after_last_step":
        return (step + 1, 0)
    return (step, phase)


WHY = {
    "frozen parameter": (
        "DDP broadcasts weights once, at construction, and never synchronises frozen ones afterwards: load "
        "pretrained weights (or seed) identically on every rank, before wrapping"
    ),
    "buffer": (
        "buffers are synchronised only by DDP's broadcast_buffers, for modules inside DDP: BatchNorm statistics "
        "with broadcast_buffers=False, buffers drawn at construction in a module outside DDP, or FSDP keep "
        "per-rank values; build them identically on every rank, broadcast them, or use SyncBatchNorm (GPU)"
    ),
    "gradient": (
        "gradients were not all-reduced alike (a parameter without gradient keeps DDP's bucket from being reduced, "
        "no_sync() around every micro-step, or a custom wrapper skips some)"
    ),
    "parameter": (
        "ranks start from or step to different weights: weights changed on one rank after wrapping, or gradients not "
        "all-reduced; load and initialise before wrapping, on every rank"
    ),
    "outside": (
        "this state lives outside the wrapped model (a frozen feature extractor, a teacher, precomputed tables), so "
        "neither DDP's construction broadcast nor its all-reduce ever touches it: build or load it identically on "
        "every rank (same seed, same checkpoint), or broadcast it from rank 0"
    ),
    "input": (
        "the entrypoint built a different global batch on each rank: features precomputed by a per-rank model, or "
        "data seeded by rank; each rank then trains on data no other rank agrees on"
    ),
}


def divergence_findings(summary: dict[str, Any]) -> tuple[list[Finding], list[dict[str, Any]], str | None]:
    """(findings, differences, first divergence text) from the case's comparisons."""
    frozen = set(summary.get("frozen_params") or []) | set(summary.get("outside_frozen") or [])
    comparisons = sorted(summary.get("comparisons") or [], key=_chrono)
    findings: list[Finding] = []
    differences: list[dict[str, Any]] = []
    for comp in comparisons:
        mismatch = comp.get("structure_mismatch")
        if mismatch:
            findings.append(
                Finding(
                    code="rank_divergence",
                    severity="error",
                    message=(
                        f"rank {mismatch.get('rank')} has a different set of {comp.get('kind')} tensors (names, "
                        f"shapes or dtypes) than rank 0 {when(comp.get('phase', ''), comp.get('step'))}: the ranks "
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
    hidden = _hidden_by_wrap(summary)
    first_by_kind: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    names_by_kind: dict[str, list[str]] = {}
    ranks_by_kind: dict[str, set[int]] = {}
    first_any: tuple[dict[str, Any], dict[str, Any], str] | None = None
    for comp in comparisons:
        for row in comp.get("rows") or []:
            kind = _kind(comp, row, frozen)
            if comp.get("phase") == "before_wrap" and row["name"] in hidden:
                continue  # equal after wrapping: reported below with what made them equal
            differences.append(
                {
                    "name": row["name"],
                    "kind": kind,
                    "phase": comp.get("phase", ""),
                    "step": comp.get("step"),
                    "rank": row.get("rank"),
                    "ranks": row.get("differing_ranks") or [],
                    "max_abs_diff": row.get("max_abs_diff"),
                    "rel_diff": row.get("rel_diff"),
                }
            )
            if first_any is None:
                first_any = (comp, row, kind)
            first_by_kind.setdefault(kind, (comp, row))
            seen = names_by_kind.setdefault(kind, [])
            if row["name"] not in seen:
                seen.append(row["name"])
            ranks_by_kind.setdefault(kind, set()).update(row.get("differing_ranks") or [])
    for kind in KIND_ORDER:
        if kind not in first_by_kind:
            continue
        comp, row = first_by_kind[kind]
        name = row["name"]
        names = names_by_kind[kind]
        module = common_module(names) if len(names) > 1 else module_of(name)
        label = {"outside": "state outside the model", "input": "input"}.get(kind, kind)
        ranks = sorted(ranks_by_kind[kind])
        others = [n for n in names if n != name]
        more = f" (and {len(others)} more{' in ' + module if module else ''})" if others else ""
        uncovered = (
            _outside_ddp(name, summary) if kind in ("frozen parameter", "buffer", "parameter") else None
        )
        message = (
            f"{label} {name}{more} differs on "
            f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} from rank 0, first "
            f"{when(comp.get('phase', ''), comp.get('step'))} (max |Δ| {row.get('max_abs_diff')}, relative "
            f"{row.get('rel_diff')}); {uncovered + '; ' if uncovered else ''}{WHY[kind]}"
        )
        findings.append(
            Finding(
                code="rank_divergence",
                severity="warning" if kind == "input" else "error",
                message=message,
                step=comp.get("step"),
                module=module,
                evidence={
                    "tensor": name,
                    "kind": kind,
                    "phase": comp.get("phase"),
                    "first_step": comp.get("step"),
                    "rank": row.get("rank"),
                    "differing_ranks": ranks,
                    "max_abs_diff": row.get("max_abs_diff"),
                    "rel_diff": row.get("rel_diff"),
                    "rank0_max_abs": row.get("ref_max_abs"),
                    "also_differ": others[:10],
                    "n_differ": len(names),
                },
                failure_modes=failure_modes_for("rank_divergence"),
            )
        )
    findings.extend(_hidden_findings(summary, hidden, frozen))
    first = None
    if first_any is not None:
        comp, row, kind = first_any
        first = (
            f"{kind} {row['name']} on rank(s) {row.get('differing_ranks')}, "
            f"{when(comp.get('phase', ''), comp.get('step'))}"
        )
    return findings, differences, first


def _outside_ddp(name: str, summary: dict[str, Any]) -> str | None:
    """'features is outside DDP (only head is wrapped)' when DDP wraps submodules only and not this one."""
    wrappers = summary.get("wrappers") or []
    ddp = [str(w.get("module")) for w in wrappers if w.get("kind") == "DDP"]
    if not ddp or "<model>" in ddp or any(w.get("kind") != "DDP" for w in wrappers):
        return None
    if any(name == m or name.startswith(m + ".") for m in ddp):
        return None
    owner = name.split(".")[0]
    return (
        f"{owner} is outside DDP (only {', '.join(ddp)} {'is' if len(ddp) == 1 else 'are'} wrapped), so nothing "
        "ever synchronises it across ranks"
    )


def _hidden_by_wrap(summary: dict[str, Any]) -> dict[str, str]:
    """Tensors that differed before wrapping and agree at step 1: name -> 'broadcast' or 'mixed'."""
    out: dict[str, str] = {}
    still = {
        row["name"]
        for comp in summary.get("comparisons") or []
        if comp.get("phase") == "forward_entry" and comp.get("step") == 1
        for row in comp.get("rows") or []
    }
    for item in summary.get("hidden_by_wrap") or []:
        name = item["name"]
        if name in still:
            continue
        flags = item.get("equal_to_rank0_before") or []
        out[name] = "broadcast" if flags and all(flags) else "mixed"
    return out


def _hidden_findings(summary: dict[str, Any], hidden: dict[str, str], frozen: set[str]) -> list[Finding]:
    """Per-rank differences that wrapping made invisible afterwards: DDP's construction broadcast
    (harmless for what DDP wraps, a real bug for what the user's code keeps outside it), or FSDP's
    sharding, which keeps each rank's own shard (a mix of every rank's weights)."""
    if not hidden:
        return []
    rows = {
        row["name"]: (comp, row)
        for comp in summary.get("comparisons") or []
        if comp.get("phase") == "before_wrap"
        for row in comp.get("rows") or []
    }
    default_wrap = bool(summary.get("default_wrap"))
    groups: dict[tuple[str, str], list[str]] = {}
    for name, how in hidden.items():
        comp, row = rows.get(name, ({}, {}))
        kind = (
            "buffer"
            if comp.get("kind") == "buffer"
            else ("frozen" if (row.get("frozen") or name in frozen) else "trainable")
        )
        groups.setdefault((how, kind), []).append(name)
    out = []
    for (how, kind), names in sorted(groups.items()):
        module = common_module(names) if len(names) > 1 else module_of(names[0])
        _comp, row = rows.get(names[0], ({}, {}))
        ranks = row.get("differing_ranks") or []
        what = {"frozen": "frozen parameters", "buffer": "buffers", "trainable": "parameters"}[kind]
        head = (
            f"{what} {', '.join(names[:3])}{', ...' if len(names) > 3 else ''} differ on rank(s) {ranks} before "
            "wrapping"
        )
        if how == "mixed":
            severity: Severity = "error"
            message = (
                f"{head}, and after wrapping they are a mix of every rank's values: FSDP's fully_shard does not "
                "broadcast, each rank keeps its own shard; initialise or load identically on every rank before "
                "sharding (or use set_model_state_dict with broadcast_from_rank0=True)"
            )
        elif default_wrap:
            severity = "warning" if kind == "trainable" else "error"
            message = (
                f"{head}; the DDP this check wrapped the whole model in broadcast rank 0's copy at construction and "
                "hid the difference. If your training code keeps them outside DDP (only a head wrapped), evaluates "
                "or saves before wrapping, or uses no DDP for them, they differ per rank there: seed and load them "
                "identically on every rank, or return 'wrap_model' to check your real wrapping"
            )
        else:
            severity = "info"
            message = (
                f"{head}; the wrapper's broadcast from rank 0 at construction made them equal, so training sees the "
                "same values (harmless under this wrapping)"
            )
        out.append(
            Finding(
                code="rank_divergence",
                severity=severity,
                message=message,
                step=0,
                module=module,
                evidence={
                    "kind": "before wrapping",
                    "tensors": names[:20],
                    "n_differ": len(names),
                    "differing_ranks": ranks,
                    "after_wrapping": "equal to rank 0's values"
                    if how == "broadcast"
                    else "a mix of ranks' values",
                    "default_wrap": default_wrap,
                },
                failure_modes=failure_modes_for("rank_divergence"),
            )
        )
    return out


# ---------------------------------------------------------------------------- gradients and steps


def unused_findings(
    summary: dict[str, Any], step_errors: dict[str, str]
) -> tuple[list[Finding], dict[str, list[str]]]:
    unused_by_rank = summary.get("unused_by_rank") or []
    unused = {str(r): list(names) for r, names in enumerate(unused_by_rank) if names}
    wrappers = summary.get("wrappers") or []
    ddps = [w for w in wrappers if w.get("kind") == "DDP"]
    frozen_after = sorted({n for w in ddps for n in w.get("frozen_after_wrapping") or []})
    ddp_error = next((e for e in step_errors.values() if DDP_UNUSED_MARK in e), None)
    findings: list[Finding] = []
    if frozen_after:
        findings.append(
            Finding(
                code="no_gradient",
                severity="error",
                message=(
                    f"{len(frozen_after)} parameter(s) ({', '.join(frozen_after[:4])}"
                    f"{', ...' if len(frozen_after) > 4 else ''}) were frozen after DDP was constructed: DDP's reducer "
                    "still waits for their gradients"
                    + (", and the next iteration fails" if ddp_error else "")
                    + "; call requires_grad_(False) before wrapping the model in DDP"
                ),
                module=common_module(frozen_after),
                evidence={
                    "parameters": frozen_after[:50],
                    "frozen_after_wrapping": True,
                    "ddp_error": _short(ddp_error),
                },
                failure_modes=failure_modes_for("no_gradient"),
            )
        )
    remaining = {r: [n for n in names if n not in frozen_after] for r, names in unused.items()}
    remaining = {r: names for r, names in remaining.items() if names}
    if remaining:
        all_names: list[str] = []
        for names in remaining.values():
            all_names.extend(n for n in names if n not in all_names)
        same = len({tuple(v) for v in remaining.values()}) == 1 and len(remaining) == len(unused_by_rank)
        tolerant = bool(ddps) and all(w.get("find_unused_parameters") for w in ddps)
        static_ddps = [w for w in ddps if w.get("static_graph")]
        changed = any(STATIC_GRAPH_MARK in e for e in step_errors.values())
        if static_ddps and changed:
            severity: Severity = "error"
            tail = (
                "with static_graph=True, DDP fixes at the first iteration which parameters get gradients; these got "
                "none in step 1 and were used later, which DDP rejects ('training graph has changed'): use the same "
                "parameters in every iteration, or drop static_graph"
            )
        elif tolerant:
            severity = "info"
            tail = (
                "DDP was built with find_unused_parameters=True, so it handles them; freeze them "
                "(requires_grad_(False)) to save the extra graph traversal"
            )
        elif static_ddps and same:
            severity = "info"
            tail = "DDP with static_graph=True accepts parameters that are unused in every iteration alike"
        else:
            severity = "error"
            tail = (
                "DDP without find_unused_parameters=True never reduces their bucket"
                + (" and the next iteration fails" if ddp_error else "")
                + ": use them in the loss, freeze them (requires_grad_(False)) before wrapping, or pass "
                "find_unused_parameters=True"
            )
            if not same:
                tail = (
                    "they differ across ranks, so the ranks' all-reduces no longer pair up (a hang or a crash in "
                    "the real job); " + tail
                )
        findings.append(
            Finding(
                code="no_gradient",
                severity=severity,
                message=(
                    f"{len(all_names)} parameter(s) with requires_grad=True get no gradient "
                    f"({', '.join(all_names[:4])}{', ...' if len(all_names) > 4 else ''}); {tail}"
                ),
                step=1,
                module=common_module(all_names),
                evidence={
                    "parameters": all_names[:50],
                    "by_rank": remaining,
                    "same_on_every_rank": same,
                    "ddp_error": _short(ddp_error),
                    "ddp_named": {r: n for e in step_errors.values() for r, n in ddp_named(e).items()},
                    "find_unused_parameters": tolerant,
                },
                failure_modes=failure_modes_for("no_gradient"),
            )
        )
    if ddp_error and not findings:
        params = sorted({p for names in ddp_named(ddp_error).values() for p in names})
        static = any(w.get("static_graph") for w in ddps)
        findings.append(
            Finding(
                code="no_gradient",
                severity="error",
                message=(
                    f"DDP's reducer found parameters without gradient in the previous iteration ({', '.join(params[:4]) or 'see the error'})"
                    + (
                        ": with static_graph=True the set of parameters used must be the same every iteration"
                        if static
                        else ": the set of parameters used changed between iterations; pass find_unused_parameters=True"
                    )
                ),
                module=common_module(params),
                evidence={"parameters": params[:50], "ddp_error": _short(ddp_error), "static_graph": static},
                failure_modes=failure_modes_for("no_gradient"),
            )
        )
    return findings, remaining


def _short(text: str | None) -> str | None:
    return text[:1200] if text else None


def ddp_named(text: str | None) -> dict[str, list[str]]:
    """rank -> parameters DDP names as having had no gradient (TORCH_DISTRIBUTED_DEBUG=INFO or DETAIL)."""
    return {
        r: [p.strip() for p in names.split(",") if p.strip()] for r, names in DDP_NAMED.findall(text or "")
    }


def no_sync_findings(summary: dict[str, Any], grads_differ: bool) -> list[Finding]:
    """Steps whose every forward ran inside DDP.no_sync(): their gradients were never all-reduced."""
    out = []
    for item in summary.get("no_sync") or []:
        by_rank = item.get("by_rank") or []
        modules: dict[str, tuple[int, int]] = {}
        for per in by_rank:
            for label, synced, unsynced in per:
                s, u = modules.get(label, (0, 0))
                modules[label] = (s + synced, u + unsynced)
        never = [label for label, (s, u) in modules.items() if u and not s]
        if never:
            out.append(
                Finding(
                    code="rank_divergence",
                    severity="error" if grads_differ else "warning",
                    message=(
                        f"every forward pass of step {item.get('step')} through DDP({', '.join(never)}) ran inside "
                        "no_sync(): gradient all-reduce was skipped for the whole step, so each rank steps with its "
                        "own gradients; run the last micro-batch of each accumulation outside no_sync()"
                    ),
                    step=item.get("step"),
                    module=None if never == ["<model>"] else never[0],
                    evidence={"kind": "no_sync", "modules": never, "forwards_by_rank": by_rank},
                    failure_modes=failure_modes_for("rank_divergence"),
                )
            )
            break
    return out


def loss_findings(summary: dict[str, Any], world: int) -> tuple[list[Finding], list[dict[str, Any]]]:
    """Step 1 against one process replaying every shard on rank 0's weights."""
    sp = summary.get("single_process")
    if not sp:
        return [], []
    rtol = float(sp.get("rtol") or 1e-4)
    loss_rel = sp.get("loss_rel_diff")
    loss_bad = not isinstance(loss_rel, (int, float)) or loss_rel > rtol
    mismatches = sp.get("grad_mismatches") or []
    by_rank = sp.get("loss_by_rank") or []
    differences = [
        {
            "name": row["name"],
            "kind": "single-process gradient",
            "phase": "single_process",
            "step": 1,
            "rank": None,
            "ranks": [],
            "max_abs_diff": row.get("max_abs_diff"),
            "rel_diff": row.get("rel_diff"),
        }
        for row in mismatches
    ]
    if not (loss_bad or mismatches or by_rank):
        return [], differences
    ranks = [row["rank"] for row in by_rank]
    first = mismatches[0] if mismatches else None
    parts = []
    if by_rank:
        parts.append(
            "the loss of "
            + ", ".join(f"rank {row['rank']} ({row['loss']} vs {row['replay']})" for row in by_rank[:4])
            + " differs from rank 0's model on the same shard"
        )
    if first:
        parts.append(f"the averaged gradient of {first['name']} differs by relative {first.get('rel_diff')}")
    elif loss_bad and not by_rank:
        parts.append(f"the mean loss differs by relative {loss_rel}")
    return [
        Finding(
            code="rank_divergence",
            severity="error",
            message=(
                f"step 1 on {world} ranks does not match one process replaying every shard with rank 0's weights: "
                + "; ".join(parts)
                + f" (rtol {rtol:g})"
            ),
            step=1,
            module=module_of(first["name"]) if first else None,
            metric="loss" if by_rank or not first else None,
            evidence={
                "kind": "single-process",
                "loss_single": sp.get("loss_single"),
                "loss_multi": sp.get("loss_multi"),
                "loss_rel_diff": loss_rel,
                "loss_differs_on_ranks": ranks,
                "loss_by_rank": by_rank[:16],
                "grad_mismatches": mismatches[:10],
                "grads_compared": sp.get("grads_compared"),
                "rtol": rtol,
            },
            failure_modes=failure_modes_for("rank_divergence"),
        )
    ], differences


def step_error_findings(step_errors: dict[str, str], explained: bool) -> tuple[list[Finding], list[str]]:
    """A step that raised on some rank: rank_failed, unless a DDP finding already explains it."""
    if not step_errors:
        return [], []
    notes = []
    first_rank, first = next(iter(sorted(step_errors.items())))
    if any(mark in first for mark in SYNCBN_CPU_MARKS):
        notes.append(
            "torch's SyncBatchNorm refuses CPU modules (DDP: 'SyncBatchNorm layers only work with GPU modules'; the "
            "layer itself: 'expected input tensor to be on GPU'): it cannot run with gloo on CPU, so this check "
            "cannot exercise it here; run check_distributed on GPUs (backend nccl), or check BatchNorm statistics "
            "on CPU through DDP's broadcast_buffers"
        )
        return [
            Finding(
                code="rank_failed",
                severity="warning",
                message=(
                    "SyncBatchNorm cannot run on CPU (torch refuses CPU tensors), so the steps could not be checked "
                    "here; run the check on GPUs with backend nccl"
                ),
                step=None,
                evidence={"ranks": sorted(step_errors), "error": first[:600], "cause": "syncbatchnorm_cpu"},
                failure_modes=failure_modes_for("rank_failed"),
            )
        ], notes
    if explained and all(DDP_UNUSED_MARK in e or STATIC_GRAPH_MARK in e for e in step_errors.values()):
        return [], notes
    same = len(set(step_errors.values())) == 1
    return [
        Finding(
            code="rank_failed",
            severity="error",
            message=(
                f"{'wrapping or a step' if first.startswith('in ') else 'the step'} raised on "
                f"rank{'s' if len(step_errors) > 1 else ''} {', '.join(sorted(step_errors))}"
                f"{' (the same error)' if same and len(step_errors) > 1 else ''}: {first[:400]}"
            ),
            evidence={"ranks": sorted(step_errors), "error": first[:1500], "first_rank": first_rank},
            failure_modes=failure_modes_for("rank_failed"),
        )
    ], notes
