"""`compare_runs`: a good run and a run under test, aligned by step; the first metric that leaves
the good run's noise band, in which order the others follow, what differs in their configs and
environments (ranked by the failure-mode catalog), and the bisect that would find the change."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from trainsleuth.tools.compare import bisect_offer as offers
from trainsleuth.tools.compare.band import Curve, MetricResult, compare_curve
from trainsleuth.tools.compare.configs import Difference, diff_configs, diff_environments, read_meta
from trainsleuth.tools.compare.rank import Observed, observed_failure_modes, rank_differences
from trainsleuth.tools.compare.runs import Run, RunInputError, load_run
from trainsleuth.tools.findings import Finding

# When two metrics leave the band at the same step, the one earlier in this list is named first:
# configuration before the optimiser's view before the loss.
ROLE_ORDER = [
    "lr", "batch_size", "loss_scale", "skipped", "nan_iterations", "grad_norm", "loss", "loss_component",
    "perplexity", "accuracy", "val_loss", "val_accuracy", "reward", "kl", "entropy", "throughput", "step_time",
    "memory", "other",
]  # fmt: skip
Verdict = Literal["diverged", "parted", "within_noise", "identical", "not_comparable"]


class MetricComparison(BaseModel):
    metric: str = Field(description="name in the run under test")
    good_metric: str = Field(description="name in the good run")
    role: str
    status: str = Field(description="diverged | within_noise | identical | not_compared")
    first_step: float | None = None
    direction: str | None = Field(default=None, description="higher | lower | nonfinite")
    good_value: float | None = None
    bad_value: float | str | None = None
    band: list[float] | None = Field(default=None, description="[low, high] of the good run's band there")
    compared: int = 0
    outside: int = 0
    identical_until: float | None = None
    parts_at: float | None = None
    note: str | None = None

    def line(self) -> str:
        head = f"{self.metric} ({self.role})"
        if self.status == "diverged":
            val = self.bad_value if isinstance(self.bad_value, str) else f"{self.bad_value:.6g}"
            band = f", band [{self.band[0]:.6g}, {self.band[1]:.6g}]" if self.band else ""
            return (
                f"{head}: leaves the band at step {self.first_step:g} ({self.direction}: {val} vs good "
                f"{self.good_value:.6g}{band}); {self.outside} of {self.compared} points outside"
            )
        if self.status == "not_compared":
            return f"{head}: not compared ({self.note})"
        extra = f"; {self.note}" if self.note else ""
        return f"{head}: {self.status.replace('_', ' ')} over {self.compared} points{extra}"


class DifferenceOut(BaseModel):
    item: str
    kind: str
    good: Any = None
    bad: Any = None
    absent: str | None = Field(default=None, description="the run that does not record it: good | bad")
    category: str
    score: float
    why: str = ""
    failure_modes: list[str] = Field(default_factory=list)

    def line(self) -> str:
        good = "(absent)" if self.absent == "good" else _short(self.good)
        bad = "(absent)" if self.absent == "bad" else _short(self.bad)
        return f"{self.item}: {good} -> {bad} [{self.category}] {self.why}".rstrip()


class Suggestion(BaseModel):
    id: str
    title: str
    pointer: str
    why: str


class CompareReport(BaseModel):
    good: str
    bad: str
    more_good: list[str] = Field(default_factory=list)
    verdict: Verdict
    summary: str
    first_divergence: MetricComparison | None = None
    order: list[str] = Field(default_factory=list, description="metric@step in the order they leave the band")
    metrics: list[MetricComparison] = Field(default_factory=list)
    restart_steps: list[float] = Field(
        default_factory=list, description="where the run under test's log restarts"
    )
    differences: list[DifferenceOut] = Field(default_factory=list)
    bookkeeping_differences: int = 0
    events_only_in_bad: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    bisect: offers.BisectOffer | None = None
    notes: list[str] = Field(default_factory=list)


@dataclass
class CompareResult:
    report: CompareReport
    plot_pairs: list[tuple[MetricResult, list[Curve], Curve]] = field(default_factory=list)


def _short(v: Any) -> str:
    text = repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------- pairing

_PREFIX = re.compile(r"^(train(ing)?|trainer|metrics?)[/_.:]", re.I)


def _norm(name: str) -> str:
    base = name.rsplit(":", 1)[-1] if ":" in name else name
    return re.sub(r"[/ .\-]+", "_", _PREFIX.sub("", base.strip().lower()))


def pair_metrics(good: Run, bad: Run, wanted: list[str]) -> list[tuple[str, str]]:
    """(good name, bad name) pairs: same name, then same normalised name, then the only metric of
    a role on both sides."""
    pairs: list[tuple[str, str]] = []
    used_g: set[str] = set()
    bad_names = list(bad.curves)
    for b in bad_names:
        if b in good.curves:
            pairs.append((b, b))
            used_g.add(b)
    rest = [b for b in bad_names if b not in used_g]
    gnorm: dict[str, list[str]] = {}
    for g in good.curves:
        if g not in used_g:
            gnorm.setdefault(_norm(g), []).append(g)
    for b in list(rest):
        cands = gnorm.get(_norm(b), [])
        if len(cands) == 1:
            pairs.append((cands[0], b))
            used_g.add(cands[0])
            rest.remove(b)
            gnorm[_norm(b)] = []
    for b in list(rest):
        role = bad.curves[b].role
        if role in ("other", "loss_component"):
            continue
        g_role = [g for g, c in good.curves.items() if c.role == role and g not in used_g]
        b_role = [x for x in rest if bad.curves[x].role == role]
        if len(g_role) == 1 and len(b_role) == 1:
            pairs.append((g_role[0], b))
            used_g.add(g_role[0])
            rest.remove(b)
    if wanted:
        keep = {w.lower() for w in wanted}
        pairs = [(g, b) for g, b in pairs if {g.lower(), b.lower(), bad.curves[b].role, _norm(b)} & keep]
    return pairs


# ---------------------------------------------------------------------------- the comparison


def compare_runs(
    good: Path,
    bad: Path,
    *,
    more_good: list[Path] | None = None,
    metrics: list[str] | None = None,
    good_ref: str | None = None,
    bad_ref: str | None = None,
    train_command: str | None = None,
    repo: Path | None = None,
    workspace: Path | None = None,
    relevance: Callable[[list[str], set[str]], list[str]] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    cancel: threading.Event | None = None,
) -> CompareResult:
    """Raises RunInputError when a run cannot be read."""
    more_good = list(more_good or [])
    total = 3 + len(more_good)
    step = 0

    def tick(msg: str) -> None:
        nonlocal step
        step += 1
        if progress:
            progress(step, total, msg)

    good_run = load_run(good, cancel)
    tick(f"read {good}")
    others = []
    for p in more_good:
        others.append(load_run(p, cancel, prefer=Path(good_run.log_file).name if good_run.log_file else None))
        tick(f"read {p}")
    bad_run = load_run(bad, cancel, prefer=Path(good_run.log_file).name if good_run.log_file else None)
    tick(f"read {bad}")
    notes = [f"good run: {n}" for n in good_run.notes] + [f"run under test: {n}" for n in bad_run.notes]
    pairs = pair_metrics(good_run, bad_run, metrics or [])
    _align_numbering(good_run, bad_run, pairs, notes)
    results: list[tuple[MetricResult, list[Curve], Curve]] = []
    positional: list[str] = []
    for gname, bname in pairs:
        if cancel is not None and cancel.is_set():
            raise RunInputError("the comparison was cancelled")
        goods = [good_run.curves[gname]]
        for o in others:
            match = [g for g, b in pair_metrics(o, bad_run, [bname]) if b == bname]
            if match:
                goods.append(o.curves[match[0]])
        bcurve = bad_run.curves[bname]
        if goods[0].positional != bcurve.positional:
            positional.append(bname)
        results.append((compare_curve(goods, bcurve), goods, bcurve))
    if positional:
        notes.append(
            f"one run numbers the records of {', '.join(positional[:5])} by position in the log, the other by "
            "logged step; aligned as given"
        )
    if metrics and not pairs:
        notes.append(f"none of {', '.join(metrics)} is in both runs")
    results.sort(key=_result_order)
    report = _summarise(good_run, bad_run, others, results, notes)
    _add_meta(report, good_run, bad_run, relevance)
    report.bisect = _bisect(report, results, bad_run, good_ref, bad_ref, train_command, repo, workspace)
    tick("compared")
    return CompareResult(report, results)


def _align_numbering(good: Run, bad: Run, pairs: list[tuple[str, str]], notes: list[str]) -> None:
    """Logs of one run that number steps differently (epochs from 0 and from 1) are aligned when the
    main metric agrees exactly under a small shift; the shift is applied to every metric and noted."""
    from dataclasses import replace

    from trainsleuth.tools.compare.band import step_shift

    if not pairs:
        return
    order = {r: i for i, r in enumerate(ROLE_ORDER)}
    g, b = min(pairs, key=lambda p: (p[1] not in bad.curves or bad.curves[p[1]].role != "loss",
                                     order.get(bad.curves[p[1]].role, 99)))  # fmt: skip
    shift = step_shift(good.curves[g], bad.curves[b])
    if shift is None:
        return
    for name, c in list(bad.curves.items()):
        bad.curves[name] = replace(
            c,
            steps=[s - shift for s in c.steps],
            first_nonfinite_step=None if c.first_nonfinite_step is None else c.first_nonfinite_step - shift,
        )
    bad.restarts = [r - shift for r in bad.restarts]
    notes.append(
        f"the run under test numbers its steps {shift:+g} from the good run ({b} agrees exactly once shifted, "
        "e.g. epochs counted from 1 instead of 0): aligned by that shift"
    )


def _result_order(item: tuple[MetricResult, list[Curve], Curve]) -> tuple[Any, ...]:
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


def _restart_near(restarts: list[float], step: float | None, interval: float) -> float | None:
    """The restart a divergence follows closely: within three of the metric's logging intervals."""
    if step is None:
        return None
    for r in restarts:
        if r <= step <= r + max(3 * interval, 0.01 * max(r, 1.0)):
            return r
    return None


def _summarise(
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
        restart = _restart_near(bad.restarts, first.first_step, _interval(results, first.metric))
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
                failure_modes=_top(observed, 5),
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
        restart = _restart_near(bad.restarts, p.parts_at, _interval(results, p.metric))
        good_restart = _restart_near(good.restarts, p.parts_at, _interval(results, p.metric))
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
                failure_modes=_top(observed, 5) if restart is not None else [],
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


def _top(observed: Observed, n: int) -> list[str]:
    return [fm for fm, _ in sorted(observed.failure_modes.items(), key=lambda kv: -kv[1])[:n]]


def _observed(report: CompareReport) -> Observed | None:
    if report.first_divergence:
        f = report.first_divergence
        found = next(
            (x for x in report.findings if x.code == "run_divergence" and x.metric == f.metric), None
        )
        after_restart = found is not None and found.evidence.get("restart_step") is not None
        return observed_failure_modes(f.role, f.direction, after_restart)
    if report.verdict == "parted":
        return observed_failure_modes(None, None, bool(report.restart_steps))
    return None


def _add_meta(
    report: CompareReport, good: Run, bad: Run, relevance: Callable[[list[str], set[str]], list[str]] | None
) -> None:
    gm = read_meta(Path(good.path), Path(good.log_file) if good.log_file else None)
    bm = read_meta(Path(bad.path), Path(bad.log_file) if bad.log_file else None)
    diffs: list[Difference] = []
    skipped = 0
    if gm.config and bm.config:
        diffs, skipped = diff_configs(gm.config, bm.config)
    elif gm.config or bm.config:
        has = "good run" if gm.config else "run under test"
        report.notes.append(f"only the {has} has a config file; settings are not diffed")
    diffs += diff_environments(gm, bm)
    observed = _observed(report)
    ranked: list[Difference] = rank_differences(diffs, observed)
    report.differences = [
        DifferenceOut(
            item=d.item,
            kind=d.kind,
            absent=d.absent,
            good=_jsonable(d.good),
            bad=_jsonable(d.bad),
            category=d.category,
            score=d.score,
            why=d.why,
            failure_modes=d.failure_modes,
        )
        for d in ranked[:60]
    ]
    report.bookkeeping_differences = skipped
    if len(ranked) > 60:
        report.notes.append(f"{len(ranked) - 60} more differences not listed")
    if not gm.sources and not bm.sources:
        report.notes.append("no config or environment file found beside either run (nothing to diff)")
    for label, m in (("good run", gm), ("run under test", bm)):
        report.notes += [f"{label}: {n}" for n in m.notes[:5]]
    if gm.commit or bm.commit:
        report.notes.append(
            f"commits: good {gm.commit or 'unknown'}, run under test {bm.commit or 'unknown'}"
        )
    report._commits = (gm.commit, bm.commit)  # type: ignore[attr-defined]
    if report.verdict in ("diverged", "parted") and report.differences:
        top = report.differences[0]
        if top.score >= 0.5:
            report.summary += (
                f" Most likely relevant difference: {top.item} ({_short(top.good)} -> {_short(top.bad)})."
            )
    elif report.verdict in ("within_noise", "identical") and report.differences:
        report.summary += (
            f" Their settings differ in {len(report.differences)} item(s) "
            f"({', '.join(d.item for d in report.differences[:3])}), without a visible effect."
        )
    report.suggestions = _suggestions(report, observed, good, bad, gm.config, bm.config, relevance)


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v][:50]
    return str(v)[:300]


def _suggestions(
    report: CompareReport,
    observed: Observed | None,
    good: Run,
    bad: Run,
    gcfg: dict[str, Any],
    bcfg: dict[str, Any],
    relevance: Callable[[list[str], set[str]], list[str]] | None,
) -> list[Suggestion]:
    from trainsleuth.knowledge.catalog import get_failure_mode

    if observed is None:
        return []
    weights = dict(observed.failure_modes)
    for i, d in enumerate(report.differences[:3]):
        for fm in d.failure_modes:
            weights[fm] = weights.get(fm, 0.0) + 0.5 / (1 + i)
    ranked = [fm for fm, _ in sorted(weights.items(), key=lambda kv: -kv[1])]
    if relevance is not None:
        signals = {c.name for c in [*good.curves.values(), *bad.curves.values()]}
        signals |= set(gcfg) | set(bcfg)
        ranked = relevance(ranked, signals)
    out: list[Suggestion] = []
    for fm in ranked[:5]:
        entry = get_failure_mode(fm)
        if entry is None:
            continue
        why = (
            "linked to the divergence seen"
            if fm in observed.failure_modes
            else "linked to a differing setting"
        )
        out.append(Suggestion(id=fm, title=entry.title, pointer=entry.uri, why=why))
    if (report.verdict == "parted" and report.restart_steps) or any(
        s.id in ("optimizer-state-not-restored", "resume-data-position") for s in out[:2]
    ):
        report.notes.append(
            "the divergence follows a resume: check_resume runs the training loop N steps, saves with your "
            "own code, restores in a fresh process and names what was not restored"
        )
    return out


# ---------------------------------------------------------------------------- bisect


def _bisect(
    report: CompareReport,
    results: list[tuple[MetricResult, list[Curve], Curve]],
    bad: Run,
    good_ref: str | None,
    bad_ref: str | None,
    train_command: str | None,
    repo: Path | None,
    workspace: Path | None,
) -> offers.BisectOffer | None:
    commits: tuple[str | None, str | None] = getattr(report, "_commits", (None, None))
    g_ref = good_ref or commits[0]
    b_ref = bad_ref or commits[1]
    first = next((r for r, _, _ in results if r.status == "diverged"), None)
    if report.verdict != "diverged" or first is None:
        if good_ref or bad_ref:
            report.notes.append(
                f"no bisect offered: the runs do not diverge ({report.verdict.replace('_', ' ')}), so there is "
                "nothing for a bisect to look for"
            )
        return None
    pkg = offers.package_change(g_ref, b_ref)
    if pkg is None and not (good_ref or bad_ref):
        lib = next(
            (
                d
                for d in report.differences
                if d.kind == "environment"
                and d.item.startswith("package:")
                and d.good
                and d.bad
                and d.score >= 0.5
            ),
            None,
        )
        if lib is not None and not (g_ref and b_ref):
            pkg = (lib.item.removeprefix("package:"), str(lib.good), str(lib.bad))
    if pkg is None and not (g_ref and b_ref and g_ref != b_ref):
        return None
    args: dict[str, Any]
    if pkg is not None:
        name, v_good, v_bad = pkg
        tool = "bisect_versions"
        args = {"package": name, "versions": [v_good, v_bad]}
        reason = (
            f"the runs differ in {name} {v_good} -> {v_bad}; add the released versions between them to "
            "`versions` (oldest first) so the bisect can name the first bad one"
        )
    else:
        tool = "bisect_commits"
        args = {"repo": str(repo or workspace or "."), "good": g_ref, "bad": b_ref}
        reason = f"the good run comes from {g_ref}, the run under test from {b_ref}"
    offer = offers.BisectOffer(tool=tool, arguments=args, reason=reason)
    if not train_command:
        offer.missing = (
            "train_command: the command that trains and writes the log (use {log} where the log path goes); "
            "with it compare_runs writes a reproducer that checks "
            f"{first.name} at step {first.first_step:g}"
        )
        return offer
    log: str | None = None
    if "{log}" not in train_command:
        base = Path(repo or workspace or ".").resolve()
        try:
            log = Path(bad.log_file or bad.path).resolve().relative_to(base).as_posix()
        except ValueError:
            offer.missing = (
                "the run under test's log lies outside the repository: put {log} in train_command where the "
                "log path goes"
            )
            return offer
    idx = first.band_steps.index(first.first_step) if first.first_step in first.band_steps else 0
    checks = [
        (s, lo, hi)
        for s, lo, hi in zip(
            first.band_steps[idx : idx + 5],
            first.band_low[idx : idx + 5],
            first.band_high[idx : idx + 5],
            strict=False,
        )
        if math.isfinite(lo) and math.isfinite(hi)
    ]
    if not checks:
        offer.missing = f"no finite band around step {first.first_step:g} to check against"
        return offer
    folder = offers.scratch_dir(Path(workspace or repo or "."), f"compare-{time.strftime('%Y%m%d-%H%M%S')}")
    path = offers.write_reproducer(
        folder,
        train_command=train_command,
        log=log,
        metric=first.name,
        checks=checks,
        crash_is_bad=first.direction == "nonfinite",
    )
    offer.reproducer = str(path)
    offer.arguments["command"] = offers.reproducer_command(path)
    return offer


def render_text(report: CompareReport, limit_metrics: int = 12) -> str:
    lines = [f"compare_runs: {report.verdict.replace('_', ' ')}. {report.summary}"]
    lines.append(f"good: {report.good}" + (f" (+{len(report.more_good)} more)" if report.more_good else ""))
    lines.append(f"under test: {report.bad}")
    if report.restart_steps:
        lines.append(
            "the run under test's log restarts at step(s) "
            + ", ".join(f"{s:g}" for s in report.restart_steps)
        )
    lines.append("Metrics:")
    lines += [f"- {m.line()}" for m in report.metrics[:limit_metrics]]
    if len(report.metrics) > limit_metrics:
        lines.append(f"- ... {len(report.metrics) - limit_metrics} more (structured output)")
    if report.events_only_in_bad:
        lines.append("Events only in the run under test: " + ", ".join(report.events_only_in_bad))
    if report.differences:
        lines.append(
            f"Differences, most likely cause first ({report.bookkeeping_differences} bookkeeping ones left out):"
        )
        lines += [f"- {d.line()}" for d in report.differences[:10]]
    if report.suggestions:
        lines.append(
            "Failure modes to read: " + "; ".join(f"{s.id} ({s.pointer})" for s in report.suggestions)
        )
    if report.bisect:
        b = report.bisect
        lines.append(
            f"Bisect offer: {b.tool}({', '.join(f'{k}={v!r}' for k, v in b.arguments.items())}). {b.reason}."
        )
        if b.reproducer:
            lines.append(f"Reproducer: {b.reproducer}. {b.approval}")
        if b.missing:
            lines.append(f"To get a reproducer, pass {b.missing}.")
    lines += [f"Note: {n}" for n in report.notes]
    return "\n".join(lines)
