"""`compare_runs`: a good run and a run under test, aligned by step; the first metric that leaves
the good run's noise band, in which order the others follow, what differs in their configs and
environments (ranked by the failure-mode catalog), and the bisect that would find the change.

The pieces: `runs` reads a run, `pairing` matches metrics, `band` compares one metric, `summary`
gives the verdict, `configs` and `rank` diff and rank settings, `bisect_offer` writes the reproducer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainsleuth.tools.compare.band import Curve, MetricResult, compare_curve
from trainsleuth.tools.compare.bisect_offer import offer_bisect
from trainsleuth.tools.compare.configs import Difference, diff_configs, diff_environments, read_meta
from trainsleuth.tools.compare.models import (
    CompareReport,
    CompareResult,
    DifferenceOut,
    Suggestion,
    render_text,
)
from trainsleuth.tools.compare.pairing import align_numbering, pair_metrics
from trainsleuth.tools.compare.rank import Observed, observed_failure_modes, rank_differences
from trainsleuth.tools.compare.runs import Run, RunInputError, load_run
from trainsleuth.tools.compare.summary import result_order, summarise

__all__ = ["CompareReport", "CompareResult", "compare_runs", "render_text"]


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
    align_numbering(good_run, bad_run, pairs, notes)
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
    results.sort(key=result_order)
    report = summarise(good_run, bad_run, others, results, notes)
    commits = _add_meta(report, good_run, bad_run, relevance)
    report.bisect = offer_bisect(
        report, results, bad_run, good_ref, bad_ref, train_command, repo, workspace, commits
    )
    tick("compared")
    return CompareResult(report, results)


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
) -> tuple[str | None, str | None]:
    """Config and environment differences, ranked, and the suggestions; returns the runs' commits."""
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
    if report.verdict in ("diverged", "parted") and report.differences:
        top = report.differences[0]
        if top.score >= 0.5:
            report.summary += f" Most likely relevant difference: {top.line().split(' [')[0]}."
    elif report.verdict in ("within_noise", "identical") and report.differences:
        report.summary += (
            f" Their settings differ in {len(report.differences)} item(s) "
            f"({', '.join(d.item for d in report.differences[:3])}), without a visible effect."
        )
    report.suggestions = _suggestions(report, observed, good, bad, gm.config, bm.config, relevance)
    return gm.commit, bm.commit


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
