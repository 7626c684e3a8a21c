"""trace_diff on good/bad pairs of the silent-error classes of issue 29, written here from the public
descriptions of the bugs (TrainCheck's OSDI'25 reproductions), and on healthy pairs.

Each pair is real: two scripts (or two environments) trained for a few steps in real subprocesses under
the tracer, the good one twice for its noise. trace_diff must name the first differing call or tensor
with its call site in each variant; a healthy pair must report nothing beyond noise.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from trainsleuth.tools.trace import Reporter, TraceDiffReport, plan_trace_diff, render_text, run_trace_diff

PY = Path(sys.executable)


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    ws = tmp_path / "proj"
    ws.mkdir()
    for name, text in files.items():
        path = ws / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], cwd=ws, check=True
    )
    return ws


def _trace(ws: Path, command_a: str, command_b: str, steps: int = 3, **kw: object) -> TraceDiffReport:
    plan = plan_trace_diff(
        workspace=ws,
        command_a=command_a,
        command_b=command_b,
        python_a=PY,
        steps=steps,
        timeout_s=300,
        **kw,  # type: ignore[arg-type]
    )
    report = run_trace_diff(plan, Reporter())
    print(render_text(report))
    return report


def _line(ws: Path, name: str, text: str) -> int:
    """The line number of the first line of `name` that contains `text`."""
    for i, line in enumerate((ws / name).read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in {name}")


# ---------------------------------------------------------------------------------------------- pytorch#51800

CRITIC_GOOD = """
\"\"\"A GAN critic with spectral norm: its initial score is measured before training (pytorch#51800).\"\"\"
import torch
from torch import nn


def critic():
    return nn.Sequential(
        nn.utils.spectral_norm(nn.Linear(8, 32)),
        nn.LeakyReLU(0.2),
        nn.utils.spectral_norm(nn.Linear(32, 1)),
    )


def main():
    torch.manual_seed(0)
    model = critic()
    probe = torch.randn(64, 8)
    model.train()
    model(probe)  # one training-mode forward runs the spectral norm's first power iteration
    model.eval()
    with torch.no_grad():
        print("initial score", model(probe).mean().item())
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(20):
        loss = model(torch.randn(64, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


main()
"""
CRITIC_BAD = CRITIC_GOOD.replace(
    "    model.train()\n    model(probe)  # one training-mode forward runs the spectral norm's first power iteration\n",
    "",
)


def test_spectral_norm_evaluated_before_its_hook_ran_in_training_mode(tmp_path: Path) -> None:
    assert CRITIC_BAD != CRITIC_GOOD
    ws = _repo(tmp_path, {"good.py": CRITIC_GOOD, "bad.py": CRITIC_BAD})
    report = _trace(ws, "python good.py", "python bad.py")
    first = report.first_difference
    assert report.verdict == "differs" and first is not None
    # The first difference: a's training-mode call (model.train() and the forward) has no counterpart in b.
    assert first.code == "call_missing" and first.only_in == "a" and first.before_training
    assert first.what == "model.train()"
    assert first.site_a == f"good.py:{_line(ws, 'good.py', 'model.train()')} in main"
    assert "the call of model in training mode at good.py:" in first.message
    # Then the evaluation itself differs: the spectral norm's sigma was never estimated in b.
    values = [d for d in report.differences if d.code == "trace_divergence"]
    score = _line(ws, "bad.py", 'print("initial score"')
    assert values and values[0].site_b == f"bad.py:{score} in main"
    assert report.noise.measured and report.noise.differing_events == 0


# ---------------------------------------------------------------------------------------------- transformers#17877

INIT_GOOD = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 1)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=0.2)
            module.bias.data.zero_()

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def main():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 6)
    y = x[:, :1] * 2
    for step in range(20):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()


main()
"""
INIT_BAD = INIT_GOOD.replace(
    "    model = Net()\n",
    "    model = Net()\n    model.apply(model._init_weights)  # post-init hook: initialises again\n",
)


def test_init_weights_applied_twice(tmp_path: Path) -> None:
    assert INIT_BAD != INIT_GOOD
    ws = _repo(tmp_path, {"good.py": INIT_GOOD, "bad.py": INIT_BAD})
    report = _trace(ws, "python good.py", "python bad.py")
    first = report.first_difference
    assert first is not None and first.code == "call_missing" and first.only_in == "b"
    assert first.what == "Tensor.normal_ on model.fc1.weight"
    assert first.site_b == f"bad.py:{_line(ws, 'bad.py', 'weight.data.normal_')} in _init_weights"
    assert "(2 times in b, 1 in a)" in first.message
    # Where the second round comes from: the extra apply() in main.
    assert first.callers_b[0] == f"bad.py:{_line(ws, 'bad.py', 'initialises again')} in main"
    assert first.events == 4  # weight and bias of both layers


# ---------------------------------------------------------------------------------------------- pytorch#115607

COMPILE_GOOD = """
\"\"\"Warm up eagerly, then train the compiled model.\"\"\"
import copy

import torch
from torch import nn

WARMUP = 2


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(32, 6)
    y = x[:, :1] * 2
    train_model = model
    for step in range(30):
        if step == WARMUP:
            train_model = torch.compile(model, backend="eager")
        loss = nn.functional.mse_loss(train_model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


main()
"""
COMPILE_BAD = COMPILE_GOOD.replace(
    'torch.compile(model, backend="eager")', 'torch.compile(copy.deepcopy(model), backend="eager")'
)


def test_compiled_step_whose_update_stops_reaching_the_parameters(tmp_path: Path) -> None:
    assert COMPILE_BAD != COMPILE_GOOD
    ws = _repo(tmp_path, {"good.py": COMPILE_GOOD, "bad.py": COMPILE_BAD})
    report = _trace(ws, "python good.py", "python bad.py", steps=3)
    first = report.first_difference
    assert first is not None and first.code == "call_args" and first.step == 3
    assert first.what == "torch.compile on model"
    line = _line(ws, "good.py", "torch.compile(")
    assert first.site_a == f"good.py:{line} in main" and first.site_b == f"bad.py:{line} in main"
    assert {"arg": "params_in_optimizer", "a": 1.0, "b": 0.0} in first.changes
    lost = next(d for d in report.differences if d.code == "update_lost")
    assert lost.step == 3 and "4 parameters" in lost.what and "no gradient" in lost.message
    assert lost.site_a == f"good.py:{_line(ws, 'good.py', 'opt.step()')} in main"
    [inv] = [x for x in report.invariants if x.invariant == "param_updated"]
    assert inv.step == 3 and "model.0.weight" in inv.subjects


# ---------------------------------------------------------------------------------------------- pytorch#84803

DDP_GOOD = """
\"\"\"Data-parallel training with hand-written gradient averaging over gloo.\"\"\"
import torch
import torch.distributed as dist
from torch import nn


def average_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    for step in range(20):
        x = torch.randn(16, 6, generator=data)
        loss = nn.functional.mse_loss(model(x), x[:, :1])
        opt.zero_grad()
        loss.backward()
        average_gradients(model)
        opt.step()
    dist.destroy_process_group()


main()
"""
FAULT = '''
_all_reduce = dist.all_reduce
STEP = [0]


def lossy_all_reduce(tensor, *args, **kwargs):
    """A faulty link, as pytorch#84803's reproduction injects it: rank 1 receives zeros at the third step."""
    work = _all_reduce(tensor, *args, **kwargs)
    if dist.get_rank() == 1 and STEP[0] == 2:
        tensor.zero_()
    return work


dist.all_reduce = lossy_all_reduce


def main():'''
DDP_BAD = DDP_GOOD.replace("\ndef main():", FAULT).replace(
    "        opt.step()\n    dist.destroy", "        opt.step()\n        STEP[0] += 1\n    dist.destroy"
)


def test_one_rank_whose_all_reduce_result_differs(tmp_path: Path) -> None:
    assert "lossy_all_reduce" in DDP_BAD and "STEP[0] += 1" in DDP_BAD
    ws = _repo(tmp_path, {"good.py": DDP_GOOD, "bad.py": DDP_BAD})
    port = 29600 + (abs(hash(str(tmp_path))) % 300)
    run = f"torchrun --nproc_per_node 2 --master_port {port}"
    report = _trace(ws, f"{run} good.py", f"{run} bad.py", steps=3)
    assert [v.processes for v in report.variants] == [2, 2]
    first = report.first_difference
    assert first is not None and first.code == "update_lost" and first.step == 3 and first.rank == 1
    assert "gradient was all zeros" in first.message
    assert (
        f"torch.distributed.all_reduce at bad.py:{_line(ws, 'bad.py', 'work = _all_reduce')} in lossy_all_reduce"
        in first.message
    )
    ranks = [x for x in report.invariants if x.invariant == "ranks_equal"]
    assert ranks and all(x.step == 3 and x.rank == 1 for x in ranks)
    assert any("the gradient of model.0.weight" in x.message for x in ranks)
    # Nothing differs before step 3, on either rank.
    assert all(d.step >= 3 for d in report.differences)


# ---------------------------------------------------------------------------------------------- healthy pairs

SEEDED = """
import argparse
import random

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
random.seed(args.seed)
torch.manual_seed(args.seed)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.norm = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(4 * 8, 1)

    def forward(self, x):
        h = self.drop(torch.relu(self.norm(self.conv(x))))
        return self.head(h.flatten(1))


model = Block()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
for step in range(20):
    x = torch.randn(16, 2, 8)
    y = x.mean(dim=(1, 2)).unsqueeze(1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
"""

# The same program after a harmless refactor: renamed locals, a helper function, moved lines, comments.
REFACTORED = """
import argparse
import random

import torch
from torch import nn


class Block(nn.Module):
    \"\"\"Conv, norm, dropout, linear head.\"\"\"

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.norm = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(4 * 8, 1)

    def forward(self, inputs):
        hidden = torch.relu(self.norm(self.conv(inputs)))
        hidden = self.drop(hidden)
        return self.head(hidden.flatten(1))


def seed_everything(value):
    random.seed(value)
    torch.manual_seed(value)


def batch():
    inputs = torch.randn(16, 2, 8)
    return inputs, inputs.mean(dim=(1, 2)).unsqueeze(1)


parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
options = parser.parse_args()
seed_everything(options.seed)

net = Block()
optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)

for it in range(20):
    inputs, targets = batch()
    loss = nn.functional.mse_loss(net(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), 1.0)  # keep steps bounded
    optimizer.step()
"""


def test_two_seeds_of_the_same_code_differ_by_nothing_beyond_noise(tmp_path: Path) -> None:
    ws = _repo(tmp_path, {"train.py": SEEDED})
    report = _trace(ws, "python train.py --seed 0", "python train.py --seed 1")
    assert report.verdict in ("identical", "within_noise"), report.summary
    assert report.first_difference is None and not report.differences and not report.invariants
    assert any(
        "seed differently" in n and "torch.manual_seed(0)" in n and "torch.manual_seed(1)" in n
        for n in report.notes
    )
    assert report.variants[0].steps_observed == 3 and report.variants[0].events > 50


def test_a_harmless_refactor_is_not_a_difference(tmp_path: Path) -> None:
    ws = _repo(tmp_path, {"train.py": SEEDED, "refactored.py": REFACTORED})
    report = _trace(ws, "python train.py", "python refactored.py")
    assert report.verdict in ("identical", "within_noise"), report.summary
    assert report.first_difference is None and not report.invariants
