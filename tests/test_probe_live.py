"""Live mode: attaching never changes training, and the run folder holds findings and trends."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

import trainsleuth.probe
from trainsleuth.tools.probe import read_probe_run


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(8, 32),
        nn.ReLU(inplace=True),
        nn.Dropout(0.2),
        nn.Linear(32, 32),
        nn.Tanh(),
        nn.Linear(32, 4),
    )


def _train(run_dir: Path | None, every: int, steps: int = 12, with_opt: bool = True) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle = None
    if run_dir is not None:
        handle = trainsleuth.probe.attach(model, opt if with_opt else None, every=every, run_dir=run_dir)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(16, 8, generator=gen)
        y = torch.randint(0, 4, (16,), generator=gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            model(x)  # an evaluation forward inside the loop is not a step
        model.train()
        if handle is not None:
            handle.record_loss(loss)
    if handle is not None:
        handle.close()
    return [p.detach().clone() for p in model.parameters()]


def test_attaching_does_not_change_training(tmp_path: Path) -> None:
    plain = _train(None, 1)
    for every, with_opt in ((1, True), (4, True), (3, False)):
        probed = _train(tmp_path / f"run{every}{with_opt}", every, with_opt=with_opt)
        assert all(torch.equal(a, b) for a, b in zip(plain, probed, strict=True)), (every, with_opt)


def test_run_folder_has_steps_findings_and_losses(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _train(run, 4)
    lines = [json.loads(x) for x in (run / "steps.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 4, 8]
    assert all(isinstance(r["loss"], float) and r["grad_norm"] > 0 for r in lines)
    report = read_probe_run(run)
    assert report.healthy and report.steps_recorded == 3
    assert json.loads((run / "findings.json").read_text())["findings"] == []


def test_live_nan_is_located(tmp_path: Path) -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 8)
            self.act = nn.ReLU()
            self.b = nn.Linear(8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.log(self.act(self.a(x))))

    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with trainsleuth.probe.attach(model, opt, every=1, run_dir=tmp_path / "nan") as handle:
        for _ in range(3):
            loss = model(torch.randn(16, 4)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            handle.record_loss(loss)
    report = read_probe_run(tmp_path / "nan")
    codes = {(f.code, f.module) for f in report.findings}
    assert ("nonfinite_forward", None) in codes or any(c == "nonfinite_forward" for c, _ in codes)
    assert any(c == "nonfinite_loss" for c, _ in codes)


def test_read_probe_run_trends_catch_a_rising_loss(tmp_path: Path) -> None:
    run = tmp_path / "div"
    run.mkdir()
    with (run / "steps.jsonl").open("w") as fh:
        for i in range(30):
            fh.write(json.dumps({"step": i, "loss": 1.0 * 1.2**i, "grad_norm": 1.0}) + "\n")
        fh.write('{"step": 30, "loss": ')  # a line cut short by a crash
    report = read_probe_run(run)
    assert any(f.code == "loss_diverging" for f in report.findings)
    assert report.skipped_lines == 1 and report.steps_recorded == 30


def test_every_step_numbers_start_at_zero_and_carry_update_ratios(tmp_path: Path) -> None:
    _train(tmp_path / "run", every=1, steps=9)
    lines = [json.loads(x) for x in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == list(range(len(lines)))
    assert len(lines) >= 8
    measured = [r["step"] for r in lines if r["median_update_ratio"] is not None]
    assert (
        measured
        and measured[0] == 0
        and all(isinstance(r["median_update_ratio"], float) for r in lines if r["step"] in measured)
    )


def test_no_grad_forward_in_training_mode_is_dropout_in_eval(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle = trainsleuth.probe.attach(model, opt, every=1, run_dir=tmp_path / "run")
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():  # "validation" without model.eval()
        model(x)
    handle.close()
    report = read_probe_run(tmp_path / "run")
    hits = [f for f in report.findings if f.code == "dropout_in_eval"]
    assert hits and hits[0].severity == "warning" and hits[0].evidence["modules"] == ["2"]
    model.eval()  # the same evaluation done right is not reported
    handle = trainsleuth.probe.attach(model, opt, every=1, run_dir=tmp_path / "run2")
    with torch.no_grad():
        model(x)
    handle.close()
    assert not [f for f in read_probe_run(tmp_path / "run2").findings if f.code == "dropout_in_eval"]
