"""The observer core: the user's own command, real subprocesses, real git workspaces, real torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainsleuth.tools.observe import (
    CommandError,
    ObserveError,
    parse_command,
    require_training,
    run_observed,
)

PY = Path(sys.executable)


def _repo(tmp_path: Path, files: dict[str, str], ignore: str = "") -> Path:
    ws = tmp_path / "proj"
    ws.mkdir()
    for name, text in files.items():
        path = ws / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    if ignore:
        (ws / ".gitignore").write_text(ignore)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], cwd=ws, check=True
    )
    return ws


PLAIN = """
import os, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 4); y = x.sum(1, keepdim=True)
os.makedirs("checkpoints", exist_ok=True)
for step in range(int(os.environ.get("STEPS", "100"))):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    torch.save(model.state_dict(), "checkpoints/last.pt")
    with open("train.log", "a") as f:
        f.write(f"{step} {loss.item()}\\n")
print("finished all steps")
"""


def test_plain_loop_is_watched_and_stopped_and_the_users_files_stay(tmp_path: Path) -> None:
    ws = _repo(tmp_path, {"train.py": PLAIN}, ignore="checkpoints/\ntrain.log\n")
    (ws / "checkpoints").mkdir()
    (ws / "checkpoints" / "last.pt").write_text("the user's checkpoint")
    (ws / "train.log").write_text("the user's log\n")
    run = run_observed("python train.py", python=PY, workspace=ws, plugins=[], steps=3)
    assert run.process.returncode == 0, run.process.output_tail()
    assert "finished all steps" not in run.process.stdout_tail  # stopped after the observed steps
    [rep] = require_training(run)
    assert rep["reason"] == "steps_done"
    assert [it["step"] for it in rep["iterations"]] == [1, 2, 3]
    losses = [it["backward"][0]["loss"] for it in rep["iterations"]]
    assert losses[0] > losses[1] > losses[2] > 0
    assert rep["iterations"][0]["lr"] == {"0": [0.1]}
    [opt] = rep["optimizers"]
    assert opt["type"] == "SGD" and opt["steps"] == 3 and opt["created_at"].endswith("train.py:5 in <module>")
    [root] = rep["roots"]
    assert root["label"] == "model" and root["type"] == "Sequential" and root["grad_calls"] == 3
    # outputs landed in the copy, the user's files are as they were
    assert (ws / "checkpoints" / "last.pt").read_text() == "the user's checkpoint"
    assert (ws / "train.log").read_text() == "the user's log\n"
    assert run.workspace_changes == []
    copy = run.mirror.tree
    assert (copy / "train.log").read_text().startswith("the user's log\n0 ")
    assert (copy / "checkpoints" / "last.pt").stat().st_size > 100


def test_absolute_paths_into_the_workspace_are_redirected(tmp_path: Path) -> None:
    script = """
    import sys, torch
    out = sys.argv[1]
    m = torch.nn.Linear(2, 1); o = torch.optim.Adam(m.parameters())
    for _ in range(5):
        o.zero_grad(); m(torch.ones(3, 2)).sum().backward(); o.step()
        torch.save(m.state_dict(), out)
    """
    ws = _repo(tmp_path, {"t.py": script})
    target = ws / "model.pt"
    run = run_observed(["python", "t.py", str(target)], python=PY, workspace=ws, plugins=[], steps=2)
    assert run.process.returncode == 0, run.process.output_tail()
    assert not target.exists()
    assert (run.mirror.tree / "model.pt").exists()
    assert run.workspace_changes == []


def test_two_optimizers_make_one_iteration_and_accumulation_many_losses(tmp_path: Path) -> None:
    gan = """
    import torch
    torch.manual_seed(0)
    G = torch.nn.Linear(2, 2); D = torch.nn.Linear(2, 1)
    optD = torch.optim.Adam(D.parameters(), 1e-3); optG = torch.optim.Adam(G.parameters(), 1e-3)
    bce = torch.nn.BCEWithLogitsLoss()
    for i in range(20):
        real = torch.randn(8, 2); fake = G(torch.randn(8, 2))
        lossD = bce(D(real), torch.ones(8, 1)) + bce(D(fake.detach()), torch.zeros(8, 1))
        optD.zero_grad(); lossD.backward(); optD.step()
        lossG = bce(D(fake), torch.ones(8, 1))
        optG.zero_grad(); lossG.backward(); optG.step()
    """
    accum = """
    import torch
    m = torch.nn.Linear(3, 1); opt = torch.optim.SGD(m.parameters(), 0.01)
    for i in range(40):
        loss = m(torch.randn(4, 3)).pow(2).mean() / 4
        loss.backward()
        if (i + 1) % 4 == 0:
            opt.step(); opt.zero_grad()
    """
    ws = _repo(tmp_path, {"gan.py": gan, "accum.py": accum})
    run = run_observed("python gan.py", python=PY, workspace=ws, plugins=[], steps=3)
    [rep] = require_training(run)
    assert [it["optimizers"] for it in rep["iterations"]] == [[0, 1]] * 3
    assert {r["label"] for r in rep["roots"]} == {"G", "D"}
    assert [[b["optimizer"] for b in it["backward"]] for it in rep["iterations"]] == [[0, 1]] * 3
    run = run_observed("python accum.py", python=PY, workspace=ws, plugins=[], steps=2)
    [rep] = require_training(run)
    assert [len(it["backward"]) for it in rep["iterations"]] == [4, 4]


def test_a_later_window_and_a_script_that_ends_first(tmp_path: Path) -> None:
    ws = _repo(tmp_path, {"train.py": PLAIN}, ignore="checkpoints/\ntrain.log\n")
    run = run_observed("python train.py", python=PY, workspace=ws, plugins=[], steps=2, start=5)
    [rep] = require_training(run)
    assert [it["step"] for it in rep["iterations"]] == [5, 6]
    run = run_observed("STEPS=2 python train.py", python=PY, workspace=ws, plugins=[], steps=5)
    assert run.command.shell
    [rep] = require_training(run)
    assert rep["reason"] == "script_ended" and [it["step"] for it in rep["iterations"]] == [1, 2]
    assert "finished all steps" in run.process.stdout_tail


def test_failures_say_what_happened(tmp_path: Path) -> None:
    ws = _repo(
        tmp_path,
        {
            "boom.py": "import torch\nm = torch.nn.Linear(2, 2)\nraise RuntimeError('config key missing: lr')\n",
            "eval.py": "import torch\nm = torch.nn.Linear(2, 2)\nwith torch.no_grad():\n    m(torch.ones(1, 2))\n",
        },
    )
    run = run_observed("python boom.py", python=PY, workspace=ws, plugins=[], steps=2)
    with pytest.raises(ObserveError) as err:
        require_training(run)
    assert err.value.kind == "raised_before_training" and "config key missing" in err.value.message
    run = run_observed("python eval.py", python=PY, workspace=ws, plugins=[], steps=2)
    with pytest.raises(ObserveError) as err:
        require_training(run)
    assert err.value.kind == "no_training_step"
    run = run_observed("echo hello", python=PY, workspace=ws, plugins=[], steps=2)
    with pytest.raises(ObserveError) as err:
        require_training(run)
    assert err.value.kind == "not_observed"
    run = run_observed("python -c 'import sys; sys.exit(3)'", python=PY, workspace=ws, plugins=[], steps=2)
    with pytest.raises(ObserveError) as err:
        require_training(run)
    assert err.value.kind == "command_failed"
    with pytest.raises(CommandError):
        run_observed("   ", python=PY, workspace=ws, plugins=[], steps=2)
    with pytest.raises(CommandError, match="cannot start"):
        run_observed(["no-such-program-xyz"], python=PY, workspace=ws, plugins=[], steps=2)


def test_the_environments_own_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    script = """
    import os, torch
    print('USER_SITE_RAN=' + os.environ.get('USER_SITE_RAN', 'no'))
    m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), 0.1)
    for _ in range(3):
        o.zero_grad(); m(torch.ones(1, 2)).sum().backward(); o.step()
    """
    ws = _repo(tmp_path, {"t.py": script})
    import os

    env = dict(os.environ, PYTHONPATH=str(site))
    run = run_observed("python t.py", python=PY, workspace=ws, plugins=[], steps=2, env=env)
    assert "USER_SITE_RAN=yes" in run.process.stdout_tail
    assert require_training(run)[0]["reason"] == "steps_done"


def test_dataloader_workers_and_torchrun_ranks(tmp_path: Path) -> None:
    loader = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    if __name__ == "__main__":
        ds = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
        m = torch.nn.Linear(3, 1); o = torch.optim.SGD(m.parameters(), 0.1)
        for x, y in DataLoader(ds, batch_size=8, num_workers=2):
            o.zero_grad(); torch.nn.functional.mse_loss(m(x), y).backward(); o.step()
    """
    ddp = """
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(50):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    dist.destroy_process_group()
    """
    ws = _repo(tmp_path, {"loader.py": loader, "ddp.py": ddp})
    run = run_observed("python loader.py", python=PY, workspace=ws, plugins=[], steps=3)
    assert len(run.reports) == 1 and run.reports[0]["reason"] == "steps_done"
    port = 29400 + (abs(hash(str(tmp_path))) % 500)
    run = run_observed(
        f"torchrun --nproc_per_node 2 --master_port {port} ddp.py",
        python=PY,
        workspace=ws,
        plugins=[],
        steps=3,
    )
    assert run.command.launcher == "torchrun"
    assert run.process.returncode == 0, run.process.output_tail()
    trained = require_training(run)
    assert sorted(r["identity"]["rank"] for r in trained) == [0, 1]
    assert all(r["reason"] == "steps_done" and len(r["iterations"]) == 3 for r in trained)
    assert all(r["roots"][0]["type"] == "DistributedDataParallel" for r in trained)


def test_parse_command() -> None:
    py = Path("/env/bin/python")
    c = parse_command("python train.py --config c.yaml", python=py)
    assert c.argv == ["/env/bin/python", "train.py", "--config", "c.yaml"] and c.launcher == "python"
    assert parse_command("torchrun --nproc_per_node 2 train.py", python=py).launcher == "torchrun"
    assert (
        parse_command("python -m torch.distributed.run --nproc_per_node 2 t.py", python=py).launcher
        == "torchrun"
    )
    assert parse_command("accelerate launch train.py", python=py).launcher == "accelerate"
    c = parse_command("cd src && python train.py", python=py)
    assert c.shell and c.argv[:2] == ["bash", "-c"] and c.launcher == "shell"
    assert parse_command(["bash", "scripts/train.sh"], python=py).launcher == "shell"
    for bad in ("", "  ", "python 'unclosed"):
        with pytest.raises(CommandError):
            parse_command(bad, python=py)
    with pytest.raises(CommandError):
        parse_command([], python=py)


def test_closure_steps_give_the_plugins_this_steps_gradients(tmp_path: Path) -> None:
    """step(closure) runs forward and backward after the pre-step hook: before_step waits for the closure."""
    plugin = """
class P:
    def __init__(self, obs):
        self.obs = obs
        self.seen = []
    def before_step(self, info, k):
        opt = info.optimizer
        p = opt.param_groups[0]["params"][0]
        self.seen.append((k, None if p.grad is None else float(p.grad.norm()), float(p.detach().norm())))
    def after_step(self, info, k):
        p = info.optimizer.param_groups[0]["params"][0]
        self.seen.append((k, "after", float(p.detach().norm())))
    def finish(self, reason):
        return {"seen": self.seen}
def make(obs, options):
    return P(obs)
"""
    script = """
    import torch
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 1)
    x = torch.randn(16, 3); y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    opt = torch.optim.LBFGS(m.parameters(), max_iter=4)
    for i in range(10):
        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            return loss
        opt.step(closure)
    """
    ws = _repo(tmp_path, {"t.py": script})
    site = tmp_path / "plugins"
    site.mkdir()
    (site / "_ts_observe_closurecheck.py").write_text(plugin)
    import os

    env = dict(os.environ, PYTHONPATH=str(site))
    run = run_observed("python t.py", python=PY, workspace=ws, plugins=["closurecheck"], steps=3, env=env)
    [rep] = require_training(run)
    assert rep["plugin_errors"] == {}
    seen = rep["plugins"]["closurecheck"]["seen"]
    befores = [s for s in seen if s[1] != "after"]
    assert [s[0] for s in befores] == [1, 2, 3]
    assert all(s[1] is not None and s[1] > 0 for s in befores), seen  # this step's gradient, never None
    afters = {s[0]: s[2] for s in seen if s[1] == "after"}
    assert all(afters[k] != w for k, _, w in befores)  # weights read before the step moved them
    assert [len(it["backward"]) >= 1 for it in rep["iterations"]] == [True] * 3
    assert rep["optimizers"][-1]["closure_steps"] >= 3
