"""From per-metric results to the verdict: which metric leaves the band first, runs that part,
a log whose replay after a restart departs from the original, a run that stops early."""

from __future__ import annotations

import math
from typing import Any

from trainsleuth.tools.compare.band import Curve, MetricResult
from trainsleuth.tools.compare.models import CompareReport, MetricComparison
from trainsleuth.tools.compare.rank import Observed, observed_failure_modes
from trainsleuth.tools.compare.runs import Run
from trainsleuth.tools.findings import Finding

# When two metrics leave the band at the same step, the one earlier in this list is named first:
# configuration before the optimiser's view before the loss.
ROLE_ORDER = [
    "lr", "batch_size", "loss_scale", "skipped", "nan_iterations", "grad_norm", "loss", "loss_component",
    "perplexity", "accuracy", "val_loss", "val_accuracy", "reward", "kl", "entropy", "throughput", "step_time",
    "memory", "other",
]  # fmt: skip


def result_order(item: tuple[MetricResult, list[Curve], Curve]) -> tuple[Any, ...]:
    r = item[0]
    rank = ROLE_ORDER.index(r.role) if r.role in ROLE_ORDER else len(ROLE_ORDER)
    status = {"diverged": 0, "within_noise": 1, "identical": 2, "not_compared": 3}[r.status]
    return (status, r.first_step if r.first_step is not None else math.inf, rank, r.name)


def _out(r: MetricResult) -> MetricComparison:
    bad_value: float | str | None = r.bad_value
    if isinstance(bad_value, float) and not math.isfinite(bad_value):
        bad_value = "nan/inf"
    return MetricComparison(
        metric=r.name,
        good_metric=r.good_name,
        role=r.role,
        status=r.status,
        first_step=r.first_step,
        direction=r.direction,
        good_value=r.good_value,
        bad_value=bad_value,
        band=list(r.band) if r.band else None,
        compared=r.compared,
        outside=r.outside,
        identical_until=r.identical_until,
        parts_at=r.parts_at,
        note=r.note,
    )


def restart_near(restarts: list[float], step: float | None, interval: float) -> float | None:
    """The restart a divergence follows closely: within three of the metric's logging intervals."""
    if step is None:
        return None
    for r in restarts:
        if r <= step <= r + max(3 * interval, 0.01 * max(r, 1.0)):
            return r
    return None


def summarise(
    good: Run,
    bad: Run,
    others: list[Run],
    results: list[tuple[MetricResult, list[Curve], Curve]],
    notes: list[str],
) -> CompareReport:
    metrics = [_out(r) for r, _, _ in results]
    diverged = [m for m in metrics if m.status == "diverged"]
    compared = [m for m in metrics if m.status != "not_compared"]
    parting = sorted((m for m in metrics if m.parts_at is not None), key=lambda m: m.parts_at or 0)
    report = CompareReport(
        good=good.path,
        bad=bad.path,
        more_good=[o.path for o in others],
        verdict="not_comparable",
        summary="",
        metrics=metrics,
        restart_steps=bad.restarts,
        notes=notes,
    )
    good_codes = {(e.code, e.metric) for e in good.events}
    report.events_only_in_bad = [
        f"{e.code}@{e.step:g}" if e.step is not None else e.code
        for e in bad.events
        if (e.code, e.metric) not in good_codes
    ][:10]
    band_what = (
        f"the spread of {1 + len(others)} good runs"
        if others
        else "the good run's step-to-step noise and pace"
    )
    if not compared:
        gnames = ", ".join(list(good.curves)[:8]) or "none"
        bnames = ", ".join(list(bad.curves)[:8]) or "none"
        report.summary = (
            "Not comparable: no metric of the two runs could be aligned "
            f"(good run: {gnames}; run under test: {bnames}). Nothing was judged."
        )
        report.notes.append("pass metrics=[...] with names present in both, or logs that share steps")
        return report
    if diverged:
        first = diverged[0]
        report.verdict = "diverged"
        report.first_divergence = first
        report.order = [f"{m.metric}@{m.first_step:g}" for m in diverged]
        restart = restart_near(bad.restarts, first.first_step, _interval(results, first.metric))
        after = f", right after the run under test restarts at step {restart:g} (a resume)" if restart else ""
        then = (
            "; then " + ", ".join(f"{m.metric} at {m.first_step:g} ({m.direction})" for m in diverged[1:6])
            if len(diverged) > 1
            else ""
        )
        report.summary = f"{first.metric} leaves {band_what} first, at step {first.first_step:g} ({first.direction}){after}{then}."
        sev = "error" if first.direction == "nonfinite" else "warning"
        observed = observed_failure_modes(first.role, first.direction, restart is not None)
        report.findings.append(
            Finding(
                code="run_divergence",
                severity=sev,
                message=f"{first.line()}{after}.",
                step=_int(first.first_step),
                metric=first.metric,
                evidence={
                    "good_value": first.good_value,
                    "bad_value": first.bad_value,
                    "band": first.band,
                    "order": report.order[:10],
                    "band_from": band_what,
                    "restart_step": restart,
                },
                failure_modes=top_failure_modes(observed, 5),
            )
        )
        for m in diverged[1:]:
            report.findings.append(
                Finding(
                    code="run_divergence",
                    severity="info",
                    message=f"then {m.line()}.",
                    step=_int(m.first_step),
                    metric=m.metric,
                    evidence={"good_value": m.good_value, "bad_value": m.bad_value, "band": m.band},
                )
            )
    elif parting:
        p = parting[0]
        report.verdict = "parted"
        restart = restart_near(bad.restarts, p.parts_at, _interval(results, p.metric))
        good_restart = restart_near(good.restarts, p.parts_at, _interval(results, p.metric))
        if restart is not None:
            why = f", right after the run under test restarts at step {restart:g} (a resume that does not restore everything)"
        elif good_restart is not None:
            why = f", right after the good run restarts at step {good_restart:g} (a resume that does not restore everything)"
            restart = good_restart
        else:
            why = ": something changed there (code, data, config or a nondeterministic kernel)"
        report.summary = (
            f"The runs are identical until step {p.identical_until:g} and part at step {p.parts_at:g}{why}; "
            f"afterwards every metric stays within {band_what}."
        )
        observed = observed_failure_modes(p.role, None, restart is not None)
        report.findings.append(
            Finding(
                code="run_divergence",
                severity="warning" if restart is not None else "info",
                message=report.summary,
                step=_int(p.parts_at),
                metric=p.metric,
                evidence={
                    "identical_until": p.identical_until,
                    "parts_at": p.parts_at,
                    "restart_step": restart,
                },
                failure_modes=top_failure_modes(observed, 5) if restart is not None else [],
            )
        )
    elif all(m.status == "identical" for m in compared):
        report.verdict = "identical"
        report.summary = f"The runs are identical at every common step of {len(compared)} metric(s) (up to the printed precision)."
    else:
        report.verdict = "within_noise"
        report.summary = (
            f"Within noise: no metric of {len(compared)} leaves {band_what} "
            f"({', '.join(m.metric for m in compared[:6])})."
        )
    _replay_check(report, bad)
    _length_check(report, results)
    short = [m for m in metrics if m.status == "not_compared"]
    if short:
        report.notes.append("not compared: " + "; ".join(f"{m.metric} ({m.note})" for m in short[:5]))
    return report


def _length_check(report: CompareReport, results: list[tuple[MetricResult, list[Curve], Curve]]) -> None:
    """A run under test that stops well before the good run (a crash, a kill) is said so: its
    metrics may agree everywhere both runs logged them."""
    for r, goods, bad in results:
        if r.role in ("loss", "loss_component") and bad.steps and goods[0].steps:
            g_first, g_last, b_last = goods[0].steps[0], goods[0].steps[-1], bad.steps[-1]
            if b_last < g_last and (b_last - g_first) < 0.9 * (g_last - g_first):
                report.notes.insert(
                    0,
                    f"the run under test stops at step {b_last:g} while the good run goes on to {g_last:g} "
                    "(a crash or a kill?): only the steps both logged were compared",
                )
            return


def _replay_check(report: CompareReport, bad: Run) -> None:
    """A log that restarts and logs some steps again: on deterministic training a faithful resume
    repeats them exactly, so where the replay departs from the original is where the resume lost
    something, whatever the good run says."""
    from trainsleuth.tools.compare.band import precision

    if not bad.replays:
        return
    name = next(
        (
            n
            for role in ("loss", "val_loss", "grad_norm", "lr")
            for n in bad.replays
            if bad.curves[n].role == role
        ),
        next(iter(bad.replays)),
    )
    pairs = bad.replays[name]
    prec = precision([v for _, a, b in pairs for v in (a, b)] + bad.curves[name].values)
    differ = [(st, a, b) for st, a, b in pairs if abs(a - b) > 2 * float(prec.at(max(abs(a), abs(b))))]
    span = f"{pairs[0][0]:g}-{pairs[-1][0]:g}"
    if not differ:
        report.notes.append(
            f"the run under test logs steps {span} twice (before and after a restart) and the replay of {name} "
            "matches the original exactly: the resume reproduces the run as far as these steps show"
        )
        return
    st, a, b = differ[0]
    text = (
        f"The run under test logs steps {span} twice (before and after its restart) and the replay differs "
        f"from the original from step {st:g} on ({name} {a:.6g} then {b:.6g}; {len(differ)} of {len(pairs)} steps "
        "differ): on deterministic training a faithful resume repeats them exactly, so the resume did not "
        "restore everything (or the training is not deterministic)."
    )
    report.summary += " " + text
    report.findings.append(
        Finding(
            code="run_divergence",
            severity="warning",
            message=text,
            step=_int(st),
            metric=name,
            evidence={
                "kind": "replay_differs",
                "replayed_steps": [pairs[0][0], pairs[-1][0]],
                "first_value": a,
                "replayed_value": b,
                "differing_steps": len(differ),
            },
            failure_modes=["optimizer-state-not-restored", "resume-data-position", "checkpoint-key-mismatch"],
        )
    )


def _interval(results: list[tuple[MetricResult, list[Curve], Curve]], metric: str | None = None) -> float:
    """The median logging interval of a metric of the run under test (the first one by default)."""
    for r, _, bad in results:
        if (metric is None or r.name == metric) and len(bad.steps) > 1:
            gaps = sorted(b - a for a, b in zip(bad.steps, bad.steps[1:], strict=False))
            return gaps[len(gaps) // 2]
    return 1.0


def _int(x: float | None) -> int | None:
    return None if x is None else int(x)


def top_failure_modes(observed: Observed, n: int) -> list[str]:
    return [fm for fm, _ in sorted(observed.failure_modes.items(), key=lambda kv: -kv[1])[:n]]
