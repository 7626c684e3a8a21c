"""Differential-trace overhead and size: a small CNN and a small transformer, plain vs traced, side by side.

The same training script runs as a plain process, under the observer alone (no plugin) and under the
observer with the tracer (`plugins=["trace"]`, as trace_diff runs it), alternating, on the same machine
and thread count. The script times each of its own steps (wall and CPU time of its process), so the
figures include everything the tracer does in the process. Step 1 is reported apart: it carries the
operation-level trace (every tensor operation of the set-up and the first step); steps 2.. carry the
API, module, parameter and buffer trace. The trace's size is the JSON the tracer hands back, per step.

    python -m benchmarks.trace [--steps 8] [--model cnn|transformer|both] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, result

GOAL_STEP = 2.0  # traced steps after the first: at most 2x a plain step
GOAL_BYTES = 64_000  # trace per step after the first, bytes of JSON

SCRIPT = """
import json, sys, time
import torch
from torch import nn

torch.set_num_threads(2)
MODEL, STEPS, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


def cnn():
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), Block(32), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), Block(64), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = [(torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))) for _ in range(4)]
    return model, opt, data, nn.functional.cross_entropy


class LM(nn.Module):
    def __init__(self, vocab=2000, d=128, layers=4, ctx=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.tok(ids) + self.pos(torch.arange(t))
        return self.head(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def lm():
    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = [(torch.randint(0, 2000, (8, 64)), torch.randint(0, 2000, (8, 64))) for _ in range(4)]
    loss = lambda out, y: nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return model, opt, data, loss


model, opt, data, loss_fn = cnn() if MODEL == "cnn" else lm()
times = []
for step in range(STEPS):
    x, y = data[step % len(data)]
    w, c = time.perf_counter(), time.process_time()
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    times.append((time.perf_counter() - w, time.process_time() - c))
    with open(OUT, "w") as fh:
        json.dump({"times": times, "params": sum(p.numel() for p in model.parameters())}, fh)
"""


def _plain(ws: Path, model: str, steps: int, out: Path) -> dict[str, Any]:
    subprocess.run([sys.executable, "bench_train.py", model, str(steps), str(out)], cwd=ws, check=True)
    return dict(json.loads(out.read_text()))


def _observed(ws: Path, model: str, steps: int, out: Path, plugins: list[str]) -> tuple[dict[str, Any], int]:
    from trainsleuth.tools.observe import run_observed

    run = run_observed(
        ["python", "bench_train.py", model, str(steps), str(out)],
        python=Path(sys.executable),
        workspace=ws,
        plugins=plugins,
        steps=steps,
        options={"trace": {"seed": 1234, "ops_steps": 1}},
        timeout_s=1800,
    )
    if run.process.returncode != 0:
        raise RuntimeError(run.process.output_tail(2000))
    size = 0
    for rep in run.reports:
        section = (rep.get("plugins") or {}).get("trace")
        if section:
            size = len(json.dumps(section))
            errors = rep.get("plugin_errors")
            if errors:
                raise RuntimeError(f"the tracer failed: {errors}")
    return dict(json.loads(out.read_text())), size


def _medians(runs: list[dict[str, Any]], clock: int) -> tuple[float, float]:
    """(median of step 1, median of steps 2..) over repetitions, in seconds."""
    first = statistics.median(r["times"][0][clock] for r in runs)
    later = statistics.median(t[clock] for r in runs for t in r["times"][1:])
    return first, later


def measure(model: str, steps: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ts-bench-trace-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "bench_train.py").write_text(textwrap.dedent(SCRIPT).lstrip())
        out = Path(tmp) / "times.json"  # outside the workspace: the observed run writes it where it is
        plain: list[dict[str, Any]] = []
        bare: list[dict[str, Any]] = []
        traced: list[dict[str, Any]] = []
        sizes: list[int] = []
        for _ in range(repeats):
            plain.append(_plain(ws, model, steps, out))
            bare.append(_observed(ws, model, steps, out, [])[0])
            t, size = _observed(ws, model, steps, out, ["trace"])
            traced.append(t)
            sizes.append(size)
        # The size of step 1 alone: the same run traced for one step.
        _, one_step = _observed(ws, model, 1, out, ["trace"])
    figures: dict[str, Any] = {"params": plain[0]["params"], "steps": steps, "repeats": repeats}
    for clock, name in ((0, "wall"), (1, "cpu")):
        p1, pn = _medians(plain, clock)
        b1, bn = _medians(bare, clock)
        t1, tn = _medians(traced, clock)
        figures[name] = {"plain": (p1, pn), "observer": (b1, bn), "traced": (t1, tn)}
    total = statistics.median(sizes)
    figures["bytes_step1"] = one_step
    figures["bytes_per_later_step"] = (total - one_step) / max(steps - 1, 1)
    return figures


def _results(model: str, f: dict[str, Any]) -> list[BenchResult]:
    cpu = f["cpu"]
    p1, pn = cpu["plain"]
    _, bn = cpu["observer"]
    t1, tn = cpu["traced"]
    label = {"cnn": "small CNN", "transformer": "small transformer"}[model]
    command = f"python -m benchmarks.trace --model {model} --steps {f['steps']} --repeats {f['repeats']}"
    details = (
        f"{f['params'] / 1e6:.2f}M parameters; CPU time per step, median of {f['repeats']} runs: plain "
        f"{pn * 1e3:.1f} ms, observer alone {bn * 1e3:.1f} ms ({bn / pn:.2f}x), traced {tn * 1e3:.1f} ms; "
        f"step 1 (operation trace): plain {p1 * 1e3:.0f} ms, traced {t1 * 1e3:.0f} ms ({t1 / p1:.1f}x); "
        f"wall: plain {f['wall']['plain'][1] * 1e3:.1f} ms, traced {f['wall']['traced'][1] * 1e3:.1f} ms"
    )
    return [
        result(
            f"trace overhead per traced step (steps 2..), {label}",
            round(tn / pn, 3),
            f"the plain run, {pn * 1e3:.1f} ms CPU per step",
            GOAL_STEP,
            direction="lower",
            unit="x step time",
            details=details,
            command=command,
        ),
        result(
            f"trace size per step (steps 2..), {label}",
            round(f["bytes_per_later_step"]),
            f"goal {GOAL_BYTES} bytes of JSON per step; step 1 with the operation trace and the set-up: "
            f"{f['bytes_step1']} bytes",
            GOAL_BYTES,
            direction="lower",
            unit="bytes per step",
            details=f"step 1 traced at the operation level took {t1 / p1:.1f}x a plain step 1",
            command=command,
        ),
    ]


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    out: list[BenchResult] = []
    for model in ("cnn", "transformer"):
        out += _results(model, measure(model, steps=4 if quick else 8, repeats=1 if quick else 2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--model", choices=("cnn", "transformer", "both"), default="both")
    args = parser.parse_args()
    for model in ("cnn", "transformer") if args.model == "both" else (args.model,):
        for r in _results(model, measure(model, args.steps, args.repeats)):
            print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
