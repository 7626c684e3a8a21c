"""From aligned traces to the report: which difference comes first, said in the user's terms."""

from __future__ import annotations

from typing import Any

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.findings import Finding
from trainsleuth.tools.trace.compare import (
    BAND_FACTOR,
    TOLERANCE,
    EventDiff,
    Noise,
    differences,
    measure_noise,
)
from trainsleuth.tools.trace.invariants import Break, infer_and_check
from trainsleuth.tools.trace.models import Difference, InvariantBreak, NoiseInfo, TraceDiffReport, VariantInfo
from trainsleuth.tools.trace.traces import ProcTrace, VariantTrace

MAX_DIFFERENCES = 10
MAX_VALUES = 3  # value differences listed after the first difference
# Which event of a block of missing events names the block best (lower is better).
SIGNIFICANCE = {
    "init": 0, "utils": 0, "mode": 0, "compile": 0, "load": 0, "optimizer": 0, "write": 0,
    "collective": 0, "call": 1, "backward": 2, "param": 3, "fwd": 4, "op": 5, "buffer": 6,
}  # fmt: skip
CODES = {
    "a_only": "call_missing",
    "b_only": "call_missing",
    "reordered": "call_order",
    "args": "call_args",
    "update_lost": "update_lost",
    "value": "trace_divergence",
}


def mode_word(ev: dict[str, Any]) -> str:
    return "training" if ev.get("mode") else "eval"


def describe(ev: dict[str, Any], proc: ProcTrace) -> str:
    """An event in the user's words: `model.eval()`, `torch.nn.init.normal_ on model.fc.weight`."""
    kind, fn = ev.get("kind"), str(ev.get("fn") or "")
    target = proc.name(ev.get("t")) if ev.get("t") else None
    short = fn.rsplit(".", 1)[-1]
    if kind == "call" and fn == "forward":
        return f"the call of {target} in {mode_word(ev)} mode"
    if kind == "fwd":
        return f"the output of {target} ({fn}, {mode_word(ev)} mode)"
    if kind == "op":
        where = proc.name(ev.get("m")) if ev.get("m") else None
        return f"{fn}" + (f" in {where}" if where else "")
    if kind == "param":
        return f"{target} after the step" if fn != "unstepped" else f"{target} (no optimizer steps it)"
    if kind == "buffer":
        return f"the buffer {target} at the end of the step"
    if kind == "backward":
        return "the loss"
    if kind in ("mode", "call"):
        return f"{target}.{short}()" if target else f"{fn}()"
    if kind == "optimizer":
        return f"the {fn} optimizer's construction"
    if kind == "collective":
        return f"{fn} of {target}" if target and not target.startswith("?") else fn
    return f"{fn} on {target}" if target else fn


def when(ev: dict[str, Any]) -> str:
    return f"step {ev.get('k')}" + (" (before the first backward)" if ev.get("setup") else "")


def site_of(ev: dict[str, Any] | None, events: list[dict[str, Any]]) -> str | None:
    """The event's own call site, or that of the model call it happened in (a submodule's output)."""
    if ev is None:
        return None
    if ev.get("site"):
        return str(ev["site"]) + (f" (via {ev['at']})" if ev.get("at") else "")
    if ev.get("kind") == "fwd":
        for other in events:
            if (
                other.get("kind") == "call"
                and other.get("k") == ev.get("k")
                and other.get("n") == ev.get("n")
            ):
                return other.get("site")
    if ev.get("kind") in ("param", "buffer"):
        return None
    return None


def _short(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "none"
    if "value" in stats:
        return f"{stats['value']:.6g}" if isinstance(stats["value"], float) else str(stats["value"])
    parts = []
    for key in ("mean", "std", "norm"):
        v = stats.get(key)
        if isinstance(v, float):
            parts.append(f"{key} {v:.6g}")
    if stats.get("nonfinite"):
        parts.append(f"{stats['nonfinite']} non-finite")
    if stats.get("shape") is not None and not parts:
        parts.append(f"shape {stats['shape']}")
    return ", ".join(parts) or "?"


def _value(d: EventDiff, ev: dict[str, Any] | None) -> dict[str, Any] | None:
    if ev is None:
        return None
    if d.field == "delta":
        return {"value": ev.get("delta")}
    return ev.get(d.field or "out")


def _again(ev: dict[str, Any], mine: ProcTrace, theirs: ProcTrace, who: str, other: str) -> str:
    """' again' when the call also runs earlier in the same step of both variants (init applied twice)."""
    from trainsleuth.tools.trace.align import event_key

    key = event_key(ev, with_site=False)
    step = ev.get("k")
    ours = sum(1 for e in mine.events if e.get("k") == step and event_key(e, with_site=False) == key)
    others = sum(1 for e in theirs.events if e.get("k") == step and event_key(e, with_site=False) == key)
    return f" ({ours} times in {who}, {others} in {other})" if others and ours > others else ""


def to_difference(
    d: EventDiff, pa: ProcTrace, pb: ProcTrace, rank: int | None, block: list[EventDiff] | None = None
) -> Difference:
    ev = d.a or d.b
    assert ev is not None
    block = block or [d]
    count = len(block)
    proc = pa if d.a is not None else pb
    what = describe(ev, proc)
    sa, sb = site_of(d.a, pa.events), site_of(d.b, pb.events)
    step_text = when(ev)
    code = CODES[d.kind]
    fields: dict[str, Any] = {}
    d.changes = [
        {"arg": c["arg"], "a": pa.name(c["a"]), "b": pb.name(c["b"])} if c.get("names") else c
        for c in d.changes
    ]
    if d.kind in ("a_only", "b_only"):
        who, other = ("a", "b") if d.kind == "a_only" else ("b", "a")
        mine, theirs = (pa, pb) if d.kind == "a_only" else (pb, pa)
        site = sa if d.kind == "a_only" else sb
        shown = [f"{what}{' at ' + site if site else ''}{_again(ev, mine, theirs, who, other)}"]
        for x in sorted(block, key=lambda x: SIGNIFICANCE.get(str((x.a or x.b or {}).get("kind")), 9)):
            xe = x.a or x.b
            if x is d or xe is None or len(shown) >= 2 or SIGNIFICANCE.get(str(xe.get("kind")), 9) > 1:
                continue
            xs = site_of(xe, mine.events)
            shown.append(f"{describe(xe, mine)}{' at ' + xs if xs else ''}")
        more = f" ({count} events in all)" if count > len(shown) else ""
        verb = "happens" if len(shown) == 1 else "happen"
        message = f"{', then '.join(shown)} {verb} in {who} but not in {other}, at {step_text}{more}"
        fields["only_in"] = who
    elif d.kind == "reordered":
        message = f"{what} happens in another order: at {sa or '?'} in a, at {sb or '?'} in b ({step_text})"
    elif d.kind == "update_lost":
        assert d.a is not None and d.b is not None
        grad = d.b.get("grad")
        why = "it had no gradient" if grad is None else "the step left it unchanged"
        if grad is not None and grad.get("norm") == 0:
            why = "its gradient was all zeros" + (
                f" (written last by {grad['by']})" if grad.get("by") else ""
            )
        if d.b.get("fn") == "unstepped":
            why = "no optimizer steps it"
        names = [pa.name((x.a or {}).get("t")) for x in block]
        subject = (
            names[0]
            if len(names) == 1
            else f"{len(names)} parameters ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"
        )
        what = subject
        message = (
            f"the update stops reaching {subject} at {step_text}: the optimizer step"
            f"{' at ' + sa if sa else ''} changes {'it' if len(names) == 1 else 'them'} in a, in b {why}"
            f"{' (b steps at ' + sb + ')' if sb and sb != sa else ''}"
        )
    elif d.kind == "args":
        listed = "; ".join(f"{c['arg']}: {_fmt(c['a'])} in a, {_fmt(c['b'])} in b" for c in d.changes[:4])
        message = f"{what} differs at {step_text}: {listed}" + _sites(sa, sb)
    else:
        va, vb = _value(d, d.a), _value(d, d.b)
        label = {"grad": "its gradient", "input": "its input", "delta": "its update size"}.get(
            d.field or "", "its value"
        )
        message = (
            f"{what} first differs beyond noise at {step_text} ({label}): a {_short(va)}; b {_short(vb)}"
            f" (distance {d.distance:.3g}, noise band {d.band or 0:.3g})" + _sites(sa, sb)
        )
    return Difference(
        code=code,
        step=int(ev.get("k") or 0),
        before_training=bool(ev.get("setup")),
        rank=rank,
        what=what,
        site_a=sa,
        site_b=sb,
        callers_a=list((d.a or {}).get("callers") or []),
        callers_b=list((d.b or {}).get("callers") or []),
        changes=d.changes,
        value_a=_value(d, d.a) if d.kind == "value" else None,
        value_b=_value(d, d.b) if d.kind == "value" else None,
        distance=None if d.distance is None or d.distance == float("inf") else d.distance,
        band=d.band,
        events=count,
        message=message,
        **fields,
    )


def _fmt(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) < 120 else text[:117] + "..."


def _sites(sa: str | None, sb: str | None) -> str:
    if sa and sb and sa != sb:
        return f" (a at {sa}; b at {sb})"
    if sa or sb:
        return f" (at {sa or sb})"
    return ""


def _blocks(found: list[EventDiff]) -> list[tuple[EventDiff, list[EventDiff]]]:
    """Consecutive events missing from one variant make one difference, named by its most telling event;
    parameters whose update is lost at the same step make one difference."""
    out: list[tuple[EventDiff, list[EventDiff]]] = []
    i = 0
    while i < len(found):
        d = found[i]
        if d.kind not in ("a_only", "b_only", "update_lost"):
            out.append((d, [d]))
            i += 1
            continue
        j = i
        while (
            j + 1 < len(found)
            and found[j + 1].kind == d.kind
            and found[j + 1].step == d.step
            and (d.kind == "update_lost" or found[j + 1].position == found[j].position + 1)
        ):
            j += 1
        block = found[i : j + 1]
        best = min(
            block, key=lambda x: (SIGNIFICANCE.get(str((x.a or x.b or {}).get("kind")), 9), x.position)
        )
        out.append((best, block))
        i = j + 1
    return out


def build_report(
    a: VariantTrace,
    a2: VariantTrace | None,
    b: VariantTrace,
    variants: list[VariantInfo],
    notes: list[str] | None = None,
    rank_map: dict[int, int] | None = None,
) -> TraceDiffReport:
    """Compare b with a rank by rank (rank_map: b's rank -> a's rank), a2 (a run again) giving the noise."""
    notes = list(notes or [])
    by_a, by_a2, by_b = a.by_rank(), (a2.by_rank() if a2 else {}), b.by_rank()
    rank_map = rank_map or {r: r for r in by_b if r in by_a}
    per_rank: list[tuple[int, list[tuple[EventDiff, list[EventDiff]]], ProcTrace, ProcTrace]] = []
    noise_info = NoiseInfo(measured=a2 is not None, tolerance=TOLERANCE, band_factor=BAND_FACTOR)
    for rb, ra in sorted(rank_map.items()):
        pa, pb = by_a[ra], by_b[rb]
        noise: Noise = measure_noise(pa, by_a2.get(ra))
        noise_info.differing_events += noise.differences
        noise_info.unstable_events += len(noise.unstable)
        noise_info.max_distance = max(noise_info.max_distance, noise.max_distance)
        found, within = differences(pa, pb, noise)
        noise_info.within_noise += within
        per_rank.append((rb, _blocks(found), pa, pb))
    multi = len(rank_map) > 1
    all_diffs: list[tuple[tuple[int, int, int], Difference]] = []
    for rb, blocks, pa, pb in per_rank:
        for order, (d, block) in enumerate(blocks):
            diff = to_difference(d, pa, pb, rb if multi else None, block)
            all_diffs.append(((d.step, order, rb), diff))
    all_diffs.sort(key=lambda x: x[0])
    ordered = [d for _, d in all_diffs]
    chosen = _choose(ordered)
    breaks = infer_and_check([r for r in (a, a2) if r is not None], b)
    invariants = [_invariant(x, b) for x in breaks]
    first = chosen[0] if chosen else None
    if first is not None or invariants:
        verdict = "differs"
    elif noise_info.within_noise:
        verdict = "within_noise"
    else:
        verdict = "identical"
    seeds = _seed_notes(a, b, notes)
    report = TraceDiffReport(
        verdict=verdict,
        summary=_summary(verdict, first, invariants, noise_info),
        first_difference=first,
        differences=chosen,
        invariants=invariants[:MAX_DIFFERENCES],
        noise=noise_info,
        variants=variants,
        seeds=seeds,
        notes=notes,
    )
    report.findings = _findings(report)
    return report


def _choose(ordered: list[Difference]) -> list[Difference]:
    """The first difference, the first of every other kind, then the next calls and updates that differ
    (values that differ after the first difference mostly follow from it: only a few are listed)."""
    if not ordered:
        return []
    chosen = [ordered[0]]
    seen = {ordered[0].code}
    for d in ordered[1:]:
        if d.code not in seen:
            chosen.append(d)
            seen.add(d.code)
    values = sum(1 for d in chosen if d.code == "trace_divergence")
    for d in ordered[1:]:
        if len(chosen) >= MAX_DIFFERENCES:
            break
        if any(d is c for c in chosen):
            continue
        if d.code == "trace_divergence":
            if values >= MAX_VALUES:
                continue
            values += 1
        chosen.append(d)
    order = {id(d): i for i, d in enumerate(ordered)}
    return sorted(chosen, key=lambda d: order[id(d)])


def _invariant(x: Break, b: VariantTrace) -> InvariantBreak:
    proc = b.by_rank().get(x.rank or 0) or (b.procs[0] if b.procs else None)
    names = [proc.name(s) if proc else s for s in x.subjects]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    rank = f" on rank {x.rank}" if x.rank is not None and len(b.procs) > 1 else ""
    texts = {
        "param_updated": f"every step of the good run updates {shown}; from step {x.step}{rank} it {x.message}",
        "buffer_constant": f"{shown} stays constant in the good run; in b it changes at step {x.step}{rank}",
        "buffer_updated": f"{shown} changes at every step of the good run; in b it stops changing at step {x.step}{rank}",
        "mode_at_site": f"{shown} is {x.message} (step {x.step}{rank}, at {x.evidence.get('site')})",
        "ranks_equal": f"{_rank_subject(x.evidence.get('kind'), shown)} {x.message} (step {x.step})",
    }
    return InvariantBreak(
        invariant=x.invariant,
        subjects=names,
        step=x.step,
        rank=x.rank,
        message=texts.get(x.invariant, x.message),
        evidence=x.evidence,
    )


def _rank_subject(kind: Any, shown: str) -> str:
    if kind == "collective":
        return f"the result of {shown}"
    if kind == "grad":
        return f"the gradient of {shown}"
    return f"{shown} after the optimizer step"


def _seed_notes(a: VariantTrace, b: VariantTrace, notes: list[str]) -> list[dict[str, Any]]:
    seeds: list[dict[str, Any]] = []
    pa, pb = (a.procs[0] if a.procs else None), (b.procs[0] if b.procs else None)
    if pa is None or pb is None:
        return seeds
    given_a = [(s.get("fn"), s.get("given")) for s in pa.seeds]
    given_b = [(s.get("fn"), s.get("given")) for s in pb.seeds]
    if given_a != given_b:
        # the calls that differ, not the ones both make alike (libraries' own `random.Random(None)` at import)
        alike = set(given_a) & set(given_b)
        only_a = [x for x in given_a if x not in alike] or given_a
        only_b = [x for x in given_b if x not in alike] or given_b
        notes.append(
            "the variants seed differently "
            f"(a: {', '.join(f'{f}({g})' for f, g in only_a[:4]) or 'none'}; "
            f"b: {', '.join(f'{f}({g})' for f, g in only_b[:4]) or 'none'}); both ran with the same pinned seeds, "
            "so this is not reported as a difference"
        )
        seeds = [{"a": s} for s in pa.seeds[:10]] + [{"b": s} for s in pb.seeds[:10]]
    return seeds


def _summary(
    verdict: str, first: Difference | None, invariants: list[InvariantBreak], noise: NoiseInfo
) -> str:
    if verdict == "identical":
        return "no difference: both variants make the same calls, in the same order, with the same values"
    if verdict == "within_noise":
        return (
            f"no difference beyond noise: {noise.within_noise} values differ, all inside the good variant's "
            "own run-to-run band"
        )
    if first is not None:
        text = f"first difference: {first.message}"
    else:
        text = f"no call or value differs, but an invariant of the good run breaks: {invariants[0].message}"
    if invariants and first is not None:
        text += f". Invariant broken: {invariants[0].message}"
    return text


def _findings(report: TraceDiffReport) -> list[Finding]:
    out: list[Finding] = []
    for d in report.differences:
        out.append(
            Finding(
                code=d.code,
                severity="warning",
                message=d.message,
                step=d.step,
                module=d.what,
                evidence={
                    k: v
                    for k, v in {
                        "site_a": d.site_a,
                        "site_b": d.site_b,
                        "rank": d.rank,
                        "changes": d.changes or None,
                        "distance": d.distance,
                        "band": d.band,
                        "first": d is report.first_difference or None,
                    }.items()
                    if v is not None
                },
                failure_modes=failure_modes_for(d.code),
            )
        )
    for x in report.invariants:
        out.append(
            Finding(
                code="invariant_broken",
                severity="warning",
                message=x.message,
                step=x.step,
                module=", ".join(x.subjects[:4]),
                evidence={"invariant": x.invariant, "rank": x.rank, **x.evidence},
                failure_modes=failure_modes_for("invariant_broken"),
            )
        )
    return out


def render_text(report: TraceDiffReport) -> str:
    lines = [report.summary]
    for v in report.variants:
        what = f"rev {v.rev}" if v.rev else v.command
        extra = f", python {v.python}" if v.python else ""
        ended = f", ended: {v.ended}" if v.ended else ""
        exc = f", raised {v.exception}" if v.exception else ""
        lines.append(
            f"  {v.label}: {what}{extra} ({v.processes} process(es), {v.steps_observed} step(s) traced, "
            f"{v.events} events{ended}{exc})"
        )
    if report.differences:
        lines.append("differences (in order):")
        for d in report.differences:
            rank = f" [rank {d.rank}]" if d.rank is not None else ""
            lines.append(f"  - {d.code}{rank}: {d.message}")
            for label, callers in (("a", d.callers_a), ("b", d.callers_b)):
                if callers:
                    lines.append(f"      called in {label} from {' <- '.join(callers)}")
    if report.invariants:
        lines.append("invariants of the good run broken in b:")
        for x in report.invariants:
            lines.append(f"  - {x.invariant}: {x.message}")
    n = report.noise
    if n.measured:
        lines.append(
            f"noise: the good variant run twice differs in {n.differing_events} event(s) (largest distance "
            f"{n.max_distance:.3g}); values count as different beyond max({n.tolerance:g}, {n.band_factor:g} x band)"
            + (f"; {n.within_noise} value(s) of b differ within that band" if n.within_noise else "")
        )
    for note in report.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)
