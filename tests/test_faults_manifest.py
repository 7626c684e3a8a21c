"""The fault benchmark's cases and labels: well-formed, complete, and matching the files on disk."""

from __future__ import annotations

import filecmp
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.faults import gen_logs
from benchmarks.faults.manifest import (
    CASES_DIR,
    EXCLUDED_PROBE_CODES,
    PRECISION_CODES,
    ManifestError,
    load_manifest,
    parse,
)
from trainsleuth.tools.findings import LOG_CODES, PROBE_CODES


@pytest.fixture(scope="module")
def manifest():  # type: ignore[no-untyped-def]
    return load_manifest()


def test_case_counts_meet_the_issue(manifest) -> None:  # type: ignore[no-untyped-def]
    kinds = Counter((c.kind, c.healthy) for c in manifest.cases)
    assert kinds[("probe", False)] >= 30
    assert kinds[("logs", False)] >= 15
    assert kinds[("probe", True)] >= 10
    assert kinds[("logs", True)] >= 5


def test_every_code_is_labelled_at_least_twice(manifest) -> None:  # type: ignore[no-untyped-def]
    labelled = Counter(e.code for c in manifest.cases for e in c.expect)
    wanted = (PROBE_CODES - EXCLUDED_PROBE_CODES) | LOG_CODES | PRECISION_CODES
    short = {code: labelled[code] for code in wanted if labelled[code] < 2}
    assert not short, f"codes labelled fewer than twice: {short}"
    assert not (set(labelled) & (EXCLUDED_PROBE_CODES - PRECISION_CODES))


def test_labels_use_known_codes_of_the_right_command(manifest) -> None:  # type: ignore[no-untyped-def]
    for case in manifest.cases:
        valid = {
            "probe": PROBE_CODES - EXCLUDED_PROBE_CODES,
            "logs": LOG_CODES,
            "precision": PRECISION_CODES,
        }[case.kind]
        for e in case.expect:
            assert e.code in valid, (case.id, e.code)
            if e.module is not None:
                assert case.is_entrypoint, case.id
            if e.step is not None:
                assert case.kind == "logs" and e.tol >= 0, case.id
        assert not (set(case.allow) & {e.code for e in case.expect}), (
            f"{case.id}: a code is both expected and allowed"
        )


def test_every_case_file_exists_and_every_file_is_a_case(manifest) -> None:  # type: ignore[no-untyped-def]
    for case in manifest.cases:
        assert case.path.exists(), case.path
    listed = {c.path.resolve() for c in manifest.cases}
    for f in sorted([*(CASES_DIR / "probe").glob("*.py"), *(CASES_DIR / "precision").glob("*.py")]):
        assert f.resolve() in listed, f"{f.name} is not in the manifest"
    for f in sorted((CASES_DIR / "logs").iterdir()):
        inside = {p.resolve() for p in [f, *f.rglob("*")]}
        assert inside & listed, f"{f.name} is not in the manifest"


def test_probe_entrypoints_return_the_interface_contract(manifest) -> None:  # type: ignore[no-untyped-def]
    """Each probe case loads through the same loader the probe runner uses, and satisfies the contract."""
    from trainsleuth.tools.runners import _ts_entrypoint as ep

    for case in (c for c in manifest.cases if c.is_entrypoint):
        contract = ep.load_contract(case.entrypoint)
        assert contract["batches"], case.id
        assert contract["unknown_keys"] == [], case.id
        names = {n for n, _ in contract["model"].named_modules()}
        for e in case.expect:
            for module in e.module or ():
                assert module in names, f"{case.id}: labelled module {module!r} is not in the model"


def test_generated_logs_match_the_generator(tmp_path: Path) -> None:
    """The committed logs are exactly what gen_logs writes, so its step constants are the truth."""
    written = gen_logs.write_text_logs(tmp_path)
    assert len(written) >= 25
    for path in written:
        committed = CASES_DIR / "logs" / path.relative_to(tmp_path)
        assert committed.is_file(), committed
        assert filecmp.cmp(path, committed, shallow=False), f"{committed} differs from gen_logs output"


def test_step_labels_agree_with_the_generator_constants(manifest) -> None:  # type: ignore[no-untyped-def]
    by_id = manifest.by_id()
    pairs = {
        ("jsonl_spike_gradnorm_leads", "grad_norm_spike"): gen_logs.SPIKE_GRAD_STEP,
        ("jsonl_spike_gradnorm_leads", "loss_spike"): gen_logs.SPIKE_LOSS_STEP,
        ("nanogpt_divergence", "divergence"): gen_logs.NANOGPT_DIVERGE,
        ("megatron_loss_scale_collapse", "skipped_steps"): gen_logs.MEGATRON_SCALE_FALL,
        ("deepspeed_overflow_min_scale", "skipped_steps"): gen_logs.DS_FIRST_OVERFLOW,
        ("jsonl_throughput_drop", "throughput_drop"): gen_logs.THROUGHPUT_JSONL_DROP,
        ("megatron_slowdown", "throughput_drop"): gen_logs.MEGATRON_SLOW_STEP,
        ("tb_nonfinite", "nonfinite_metric"): gen_logs.TB_NAN_STEP,
        ("mlflow_divergence", "divergence"): gen_logs.MLFLOW_DIVERGE,
        ("megatron_spike_rank_prefixed", "grad_norm_spike"): gen_logs.MEGA_SPIKE_GRAD,
        ("megatron_spike_rank_prefixed", "loss_spike"): gen_logs.MEGA_SPIKE_LOSS,
        ("keras_overfitting", "overfitting"): gen_logs.KERAS_OVERFIT_EPOCH,
        ("lightning_overfitting", "overfitting"): gen_logs.LIGHTNING_OVERFIT_EPOCH * 100 + 99,
    }
    for (cid, code), step in pairs.items():
        (label,) = [e for e in by_id[cid].expect if e.code == code]
        assert label.step == step, (cid, code)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"cases": [{"id": "a", "kind": "probe", "entry": "x.py:f", "expect": [{"code": "nope"}]}]},
            "not a probe code",
        ),
        (
            {"cases": [{"id": "a", "kind": "logs", "path": "x.log", "expect": [{"code": "dead_relu"}]}]},
            "not a logs code",
        ),
        (
            {
                "cases": [
                    {
                        "id": "a",
                        "kind": "probe",
                        "entry": "x.py:f",
                        "expect": [{"code": "precision_mismatch"}],
                    }
                ]
            },
            "not a probe code",
        ),
        (
            {
                "cases": [
                    {
                        "id": "a",
                        "kind": "logs",
                        "path": "x.log",
                        "healthy": True,
                        "expect": [{"code": "plateau"}],
                    }
                ]
            },
            "healthy case expects nothing",
        ),
        ({"cases": [{"id": "a", "kind": "logs", "path": "x.log"}]}, "at least one code"),
        ({"cases": [{"id": "a", "kind": "logs", "path": "x.log", "healthy": True}] * 2}, "listed twice"),
        ({"cases": [{"id": "a", "kind": "probe", "entry": "x.py", "healthy": True}]}, "file.py:function"),
        (
            {
                "cases": [
                    {
                        "id": "a",
                        "kind": "logs",
                        "path": "x.log",
                        "expect": [{"code": "plateau", "step": "10"}],
                    }
                ]
            },
            "step must be an integer",
        ),
        ({"nothing": 1}, "'cases' list"),
    ],
)
def test_malformed_manifests_are_refused_with_the_reason(raw: dict, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        parse(raw, check_files=False)


def test_missing_case_file_is_refused(tmp_path: Path) -> None:
    raw = {"cases": [{"id": "a", "kind": "logs", "path": "gone.log", "healthy": True}]}
    with pytest.raises(ManifestError, match="does not exist"):
        parse(raw, base=tmp_path)


def test_the_plain_torch_oracle_confirms_every_entrypoint_label(capsys: pytest.CaptureFixture[str]) -> None:
    """Ground truth: each broken set-up really shows its fault, each healthy one really trains cleanly."""
    from benchmarks.faults import oracle

    status = oracle.main([])
    out = capsys.readouterr().out
    assert status == 0, "\n".join(
        line for line in out.splitlines() if "MISMATCH" in line or line.startswith(" ")
    )
    assert out.count("\nok ") + out.startswith("ok ") >= 50
