"""check_resume on real training code in real subprocesses: it names the missing piece for each
planted resume bug (optimizer state, LR scheduler, grad scaler, RNG, dataloader position, EMA),
stays quiet on a correct resume (with the user's own save/load and with the runner's full
state_dict save), and tells hidden state from nondeterminism."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainsleuth.tools.compare.resume import ResumeError, check_resume, render_resume

ROOT = Path(__file__).resolve().parent.parent
CASES = "examples/resume/resume_cases.py"


def _check(entry: str, cwd: Path = ROOT, **kw: int):  # type: ignore[no-untyped-def]
    return check_resume(entry, python=Path(sys.executable), cwd=cwd, timeout_s=180, **kw)


@pytest.mark.parametrize(
    ("case", "piece", "shows"),
    [
        ("no_optimizer", "optimizer state (moments / momentum)", "the weights after the step at step 5"),
        ("no_scheduler", "LR scheduler step", "the learning rate at step 5"),
        ("no_scaler", "grad scaler", None),  # fp32 on CPU: a different scale changes no update
        ("no_rng", "RNG state", "the loss at step 5"),  # other dropout masks
        ("no_data_position", "dataloader position", "the batch at step 5"),
        ("no_ema", "EMA weights", None),  # the EMA never feeds back into training
    ],
)
def test_names_the_piece_a_planted_bug_leaves_out(case: str, piece: str, shows: str | None) -> None:
    affects = shows is not None
    report = _check(f"{CASES}:{case}")
    assert report.verdict == "not_restored" and not report.healthy, render_resume(report)
    named = {n.piece: n for n in report.not_restored}
    assert piece in named, named
    assert named[piece].affects_training is affects
    if case != "no_optimizer":  # a lost optimizer also loses its param_groups' lr: both are named
        assert list(named) == [piece], named
    finding = next(f for f in report.findings if f.module == piece)
    assert finding.code == "resume_not_restored"
    assert finding.severity == ("error" if affects else "warning")
    assert report.first_divergence == shows
    if affects:
        assert finding.step == 5
    text = render_resume(report)
    assert f"not restored: {piece}" in text


@pytest.mark.parametrize("case", ["correct", "state_dicts"])
def test_quiet_on_a_correct_resume(case: str) -> None:
    report = _check(f"{CASES}:{case}", steps_before=3, steps_after=3)
    assert report.verdict == "restored" and report.healthy, render_resume(report)
    assert not report.findings and report.first_divergence is None
    losses = [(s.loss_reference, s.loss_resumed) for s in report.steps]
    assert len(losses) == 3 and all(a == b for a, b in losses)
    assert report.mode == ("user save/load" if case == "correct" else "state_dict")
    if case == "state_dicts":
        assert any(u.startswith("dataloader position") for u in report.untested)
        # Without the project's own save/load, "restored" proves nothing about its checkpoints: it says so
        # (a blind assistant was told "restores everything" about a checkpoint that drops the scheduler).
        assert any(u.startswith("your checkpoint code") for u in report.untested)
        assert "NOT by your checkpoint code" in render_resume(report)
    else:
        assert not any(u.startswith("your checkpoint code") for u in report.untested)
        assert "NOT by your checkpoint code" not in render_resume(report)


HIDDEN = """\
import torch

def make():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    state = {"step": 0}
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def step_fn(m, batch):
        state["step"] += 1  # a hand-rolled schedule's counter, kept outside every state_dict
        for g in opt.param_groups:
            g["lr"] = 0.1 / state["step"]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(batch[0]), batch[1])
        loss.backward()
        opt.step()
        return loss

    def save(path):
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)

    def load(path):
        s = torch.load(path)
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])

    return {"model": model, "batch": (x, y), "optimizer": opt, "step_fn": step_fn, "save": save, "load": load}
"""

NONDETERMINISTIC = """\
import os
import torch

def make():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    noise = int.from_bytes(os.urandom(2), "little") / 65536  # differs in every process

    def loss_fn(m, batch):
        return torch.nn.functional.mse_loss(m(batch[0]), batch[1]) + noise * m.weight.sum()

    return {"model": model, "batch": (torch.ones(8, 4), torch.ones(8, 1)), "optimizer": opt, "loss_fn": loss_fn}
"""


def test_state_outside_the_saved_objects_and_nondeterminism_are_told_apart(tmp_path: Path) -> None:
    (tmp_path / "hidden.py").write_text(HIDDEN)
    (tmp_path / "noisy.py").write_text(NONDETERMINISTIC)
    hidden = _check("hidden.py:make", cwd=tmp_path, steps_before=3, steps_after=2)
    assert hidden.verdict == "unexplained" and not hidden.healthy, render_resume(hidden)
    assert hidden.findings[0].module == "state outside the saved objects"
    assert hidden.first_divergence == "the learning rate at step 4"
    noisy = _check("noisy.py:make", cwd=tmp_path, steps_before=2, steps_after=2)
    assert noisy.verdict == "nondeterministic", render_resume(noisy)
    assert any("not deterministic" in n for n in noisy.notes)


BAD = {
    "no_opt.py": "import torch\ndef make():\n    return {'model': torch.nn.Linear(2, 1), 'batch': torch.randn(2, 2)}\n",
    "half.py": (
        "import torch\ndef make():\n    m = torch.nn.Linear(2, 1)\n"
        "    return {'model': m, 'batch': (torch.randn(2, 2), torch.randn(2, 1)), 'optimizer': "
        "torch.optim.SGD(m.parameters(), lr=0.1), 'loss_fn': lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), "
        "'save': lambda p: None}\n"
    ),
    "load_fails.py": (
        "import torch\ndef make():\n    m = torch.nn.Linear(2, 1)\n"
        "    def load(p):\n        raise KeyError('optimizer')\n"
        "    return {'model': m, 'batch': (torch.randn(2, 2), torch.randn(2, 1)), 'optimizer': "
        "torch.optim.SGD(m.parameters(), lr=0.1), 'loss_fn': lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), "
        "'save': lambda p: torch.save(m.state_dict(), p), 'load': load}\n"
    ),
}


@pytest.mark.parametrize(
    ("name", "kind", "needle"),
    [
        ("no_opt.py", "contract_error", "give 'optimizer'"),
        ("half.py", "contract_error", "give both 'save' and 'load'"),
        ("load_fails.py", "load_raised", "your load(path) raised KeyError"),
    ],
)
def test_entrypoint_problems_are_clear_errors(tmp_path: Path, name: str, kind: str, needle: str) -> None:
    (tmp_path / name).write_text(BAD[name])
    with pytest.raises(ResumeError) as info:
        _check(f"{name}:make", cwd=tmp_path, steps_before=1, steps_after=1)
    assert info.value.kind == kind and needle in info.value.message
    assert info.value.next_step


SLOW = """\
import time
import torch

def make():
    m = torch.nn.Linear(2, 1)
    def step_fn(model, batch):
        time.sleep(600)
    return {"model": m, "batch": torch.randn(2, 2), "optimizer": torch.optim.SGD(m.parameters(), lr=0.1),
            "step_fn": step_fn}
"""


def test_cancel_and_timeout_kill_both_processes(tmp_path: Path) -> None:
    import threading
    import time

    import psutil

    (tmp_path / "slow.py").write_text(SLOW)
    me = psutil.Process()
    cancel = threading.Event()
    threading.Timer(8.0, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(ResumeError) as info:
        check_resume(
            "slow.py:make", python=Path(sys.executable), cwd=tmp_path, timeout_s=300, cancel_event=cancel
        )
    assert info.value.kind == "cancelled" and time.monotonic() - started < 60
    with pytest.raises(ResumeError) as late:
        check_resume("slow.py:make", python=Path(sys.executable), cwd=tmp_path, timeout_s=10)
    assert late.value.kind == "timeout" and "pass fewer steps or a larger timeout_s" in (
        late.value.next_step or ""
    )
    time.sleep(1.0)
    assert not [
        p for p in me.children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]
