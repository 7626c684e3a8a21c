"""The fault harness: scoring on a synthetic mini-suite, real CLI subprocesses (a stand-in command),
the docs table writer, and the `python -m benchmarks` aggregator's tolerance of missing/failing benchmarks."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import benchmarks.__main__ as bench_main
from benchmarks.common import result, validate
from benchmarks.faults.harness import BEGIN, END, CaseRun, render_markdown, run_all, score, write_table
from benchmarks.faults.manifest import parse

MINI = {
    "cases": [
        {
            "id": "nan",
            "kind": "probe",
            "entry": "a.py:setup",
            "expect": [
                {"code": "nonfinite_forward", "module": ["head", "head.proj"]},
                {"code": "nonfinite_loss"},
            ],
            "allow": ["nonfinite_gradient"],
        },
        {
            "id": "dead",
            "kind": "probe",
            "entry": "b.py:setup",
            "expect": [{"code": "dead_relu", "module": "body.1"}],
        },
        {
            "id": "spike",
            "kind": "logs",
            "path": "s.log",
            "expect": [{"code": "loss_spike", "step": 300, "tol": 20}],
        },
        {
            "id": "div",
            "kind": "logs",
            "path": "d.log",
            "expect": [{"code": "divergence", "step": 1000, "tol": 50}],
        },
        {"id": "ok1", "kind": "probe", "entry": "h.py:setup", "healthy": True},
        {"id": "ok2", "kind": "logs", "path": "h.log", "healthy": True},
        {"id": "ok3", "kind": "logs", "path": "h3.log", "healthy": True},
    ]
}


def rec(code: str, severity: str = "error", **kw: object) -> dict:
    return {"code": code, "severity": severity, "message": "m", **kw}


def mini_runs() -> dict[str, CaseRun]:
    return {
        # right origin (second accepted name), plus an allowed consequence and one unexpected warning
        "nan": CaseRun(
            "nan",
            True,
            [
                rec("nonfinite_forward", module="head.proj"),
                rec("nonfinite_loss"),
                rec("nonfinite_gradient"),
                rec("plateau", "warning"),
            ],
        ),
        # detected, wrong module
        "dead": CaseRun("dead", True, [rec("dead_relu", "warning", module="body.0")]),
        # detected within tolerance (|315 - 300| <= 20)
        "spike": CaseRun("spike", True, [rec("loss_spike", "warning", step=315)]),
        # only as info: does not count as detected
        "div": CaseRun("div", True, [rec("divergence", "info", step=1000)]),
        # healthy with an info record only: not a false alarm
        "ok1": CaseRun("ok1", True, [rec("input_not_normalized", "info")]),
        "ok2": CaseRun("ok2", True, [rec("plateau", "warning"), rec("oscillation", "error")]),
        "ok3": CaseRun("ok3", False, error="exit 2, no JSON report: not available yet"),
    }


def test_scoring_on_a_synthetic_mini_suite() -> None:
    m = parse(MINI, check_files=False)
    s = score(m.cases, mini_runs())
    assert (s.detected, s.labels) == (4, 5)
    assert s.recall == pytest.approx(0.8)
    assert s.per_code["divergence"].recall == 0.0 and s.per_code["divergence"].missed == ["div"]
    assert s.per_code["loss_spike"].recall == 1.0
    assert s.false_alarms == {"ok2": ["oscillation", "plateau"]}
    assert s.healthy_total == 3
    assert (s.origin_right, s.origin_total) == (1, 2)
    assert any(w.startswith("dead (dead_relu: got body.0") for w in s.origin_wrong)
    assert (s.step_right, s.step_total) == (1, 2)  # the info-only divergence is a miss for steps too
    assert s.unexpected == {"nan": ["plateau"]}
    assert set(s.failed_runs) == {"ok3"}


def test_step_tolerance_is_inclusive_and_strict_outside() -> None:
    m = parse(MINI, check_files=False)
    spike = [c for c in m.cases if c.id == "spike"]
    for step, right in ((320, True), (280, True), (321, False), (279, False)):
        s = score(spike, {"spike": CaseRun("spike", True, [rec("loss_spike", step=step)])})
        assert (s.step_right == 1) is right, step


def test_failed_run_of_a_broken_case_counts_as_missed() -> None:
    m = parse(MINI, check_files=False)
    s = score(m.cases, {})
    assert s.detected == 0 and len(s.failed_runs) == len(m.cases)
    assert s.false_alarms == {}


def test_markdown_names_the_failing_cases() -> None:
    m = parse(MINI, check_files=False)
    text = render_markdown(score(m.cases, mini_runs()), "python -m benchmarks.faults", "now", 1.0)
    assert "| recall over all labelled codes | 0.80 (4/5) | >= 0.95 |" in text
    assert "| `divergence` | logs analyze | 1 | 0 | 0.00 | div |" in text
    assert "ok2 (oscillation, plateau)" in text
    assert "ok3: exit 2, no JSON report: not available yet" in text


FAKE_CLI = r"""
import json, sys
args = sys.argv[1:]
answers = json.load(open(sys.argv[0] + ".json"))
if args[0] == "probe":
    key = args[1].rpartition(":")[0].rsplit("/", 1)[-1]
elif args[:2] == ["logs", "analyze"]:
    key = args[2].rsplit("/", 1)[-1]
else:
    sys.exit(2)
ans = answers.get(key)
if ans is None:
    print("trainsleuth: not available yet in this version", file=sys.stderr)
    sys.exit(2)
print("some chatter on stdout")
print(json.dumps(ans))
sys.exit(1 if ans.get("findings") or ans.get("events") else 0)
"""


def test_harness_runs_cases_through_a_cli_subprocess(tmp_path: Path) -> None:
    fake = tmp_path / "fake_cli.py"
    fake.write_text(FAKE_CLI, encoding="utf-8")
    (tmp_path / "fake_cli.py.json").write_text(
        json.dumps(
            {
                "a.py": {"findings": [rec("nonfinite_forward", module="head"), rec("nonfinite_loss")]},
                "s.log": {"ok": True, "events": [rec("loss_spike", "warning", step=300)]},
                "h.py": {"findings": []},
                "d.log": {"ok": False, "error": {"kind": "empty", "message": "the log holds no metrics"}},
            }
        ),
        encoding="utf-8",
    )
    m = parse(MINI, check_files=False)
    runs = run_all(m.cases, cli=[sys.executable, str(fake)], jobs=2, timeout=60)
    assert runs["nan"].ok and len(runs["nan"].records) == 2
    assert runs["spike"].ok and runs["ok1"].ok and runs["ok1"].records == []
    assert not runs["div"].ok and "the log holds no metrics" in runs["div"].error
    assert not runs["dead"].ok and "not available yet" in runs["dead"].error
    s = score(m.cases, runs)
    assert s.per_code["nonfinite_forward"].detected == 1 and s.origin_right == 1
    assert s.step_right == 1


def test_harness_reports_a_missing_cli_clearly(tmp_path: Path) -> None:
    m = parse(MINI, check_files=False)
    runs = run_all(m.cases[:1], cli=[str(tmp_path / "no-such-trainsleuth")], jobs=1, timeout=30)
    assert not runs["nan"].ok and "could not start" in runs["nan"].error


def test_write_table_replaces_only_its_own_block(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(
        "# Benchmarks\n\n## Probe\n\n_pending_\n\n## Fault benchmark (`python -m benchmarks.faults`)\n\nIntro kept.\n\n_pending_\n\n## Later\n\nkeep me\n",
        encoding="utf-8",
    )
    write_table(doc, "table one\n")
    text = doc.read_text(encoding="utf-8")
    assert "Intro kept." in text and "table one" in text and "keep me" in text
    assert text.count("_pending_") == 1  # the probe section's placeholder is untouched
    write_table(doc, "table two\n")
    text = doc.read_text(encoding="utf-8")
    assert "table one" not in text and "table two" in text
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert text.index("table two") < text.index("## Later")


def test_protocol_result_and_validate() -> None:
    r = result("x", 1.3, "baseline", 1.25, direction="lower", unit="x time")
    assert r["met"] is False
    assert result("y", 0.97, "b", 0.95)["met"] is True
    assert result("z", None, "b", 0.95)["met"] is False
    assert validate(r) == [r]
    with pytest.raises(ValueError, match="lacks"):
        validate({"name": "x"})
    with pytest.raises(ValueError, match="ratio"):
        validate({"name": "x", "ratio": "fast", "baseline": "b", "goal": 1, "met": True})


def test_aggregator_reports_missing_and_failing_benchmarks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_main.run_child("no_such_benchmark_xyz", quick=True, timeout=30)["status"] == "missing"

    def boom(quick: bool = False) -> list:
        raise RuntimeError("feature not built yet")

    fake = types.ModuleType("benchmarks._fake_failing")
    fake.run_benchmark = boom  # type: ignore[attr-defined]
    sys.modules["benchmarks._fake_failing"] = fake
    out = tmp_path / "r.json"
    try:
        bench_main._child("_fake_failing", False, str(out))
    finally:
        del sys.modules["benchmarks._fake_failing"]
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert payload["ok"] is False and "feature not built yet" in payload["error"]

    code = bench_main.main(["no_such_benchmark_xyz", "--timeout", "30"])
    assert code == 2
    assert "MISSING" in capsys.readouterr().out


def test_aggregator_renders_ratio_baseline_and_goal() -> None:
    outcomes: dict[str, dict[str, Any]] = {
        "probe": {
            "status": "ran",
            "results": [result("overhead every step", 1.1, "plain steps", 1.25, direction="lower", unit="x")],
        },
        "logs": {"status": "failed", "error": "RuntimeError: boom"},
    }
    text = bench_main.render(outcomes)
    assert "overhead every step" in text and "1.1 x" in text and "<= 1.25 x" in text and "yes" in text
    assert "FAILED" in text and "RuntimeError: boom" in text
