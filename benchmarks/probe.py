"""Live-mode probe overhead on a transformer and a CNN, on CPU, plain vs attached.

For each model (a ~10M-parameter causal transformer; a ResNet-style CNN with batch norm), three
identical copies train side by side, one step each in turn (order alternating), on the same data and
thread count, so machine noise hits all of them alike: plain steps, `trainsleuth.probe.attach(every=1)`
and `attach(every=16)`. The figure is the ratio of median step times. Goals: <= 1.25x at every step,
<= 1.05x at every 16th step, for each model.

    python -m benchmarks.probe [--steps 48] [--model transformer|cnn|both]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from benchmarks.common import BenchResult, result

# wall time by default; --clock cpu measures this process's CPU time instead, which a machine crowded by
# other jobs inflates far less (waiting for a core is not counted), at the price of not seeing waits
CPU_CLOCK = False
GOAL_EVERY_STEP = 1.25
GOAL_EVERY_16 = 1.05


def _build(torch: Any) -> tuple[Any, Any, Any]:
    from torch import nn

    class LM(nn.Module):
        def __init__(self, vocab: int = 8000, d: int = 256, layers: int = 8, ctx: int = 64) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(ctx, d)
            self.drop = nn.Dropout(0.1)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)

        def forward(self, ids: Any) -> Any:
            t = ids.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(t)
            h = self.drop(self.tok(ids) + self.pos(torch.arange(t)))
            return self.head(self.norm(self.blocks(h, mask=mask, is_causal=True)))

    torch.manual_seed(0)
    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ids = torch.randint(0, 8000, (4, 33))
    return model, opt, ids


def _build_cnn(torch: Any) -> tuple[Any, Any, Any]:
    from torch import nn

    def block(cin: int, cout: int, stride: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )

    torch.manual_seed(0)
    model = nn.Sequential(
        block(3, 64, 1),
        block(64, 128, 2),
        block(128, 256, 2),
        block(256, 256, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = (torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,)))
    return model, opt, data


def _loss(model: Any, data: Any) -> Any:
    from torch import nn

    if isinstance(data, tuple):
        return nn.functional.cross_entropy(model(data[0]), data[1])
    logits = model(data[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), data[:, 1:].reshape(-1))


def _step(torch: Any, model: Any, opt: Any, ids: Any, handle: Any) -> float:
    clock = time.process_time if CPU_CLOCK else time.perf_counter
    t0 = clock()
    loss = _loss(model, ids)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if handle is not None:
        handle.record_loss(loss)
    return clock() - t0


def measure(steps: int = 48, model: str = "transformer") -> dict[str, Any]:
    """Three identical models train side by side, one step each in turn (plain, every 1, every 16)."""
    import copy

    import torch

    import trainsleuth.probe

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    base, _, ids = (_build if model == "transformer" else _build_cnn)(torch)
    n_params = sum(p.numel() for p in base.parameters())
    # "control" is a second plain copy: how far two identical copies differ in this harness (cache and
    # position effects) is the noise floor the ratios must be read against.
    names = ("plain", "every1", "every16", "control")
    samples: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for name in names:
            net = copy.deepcopy(base)
            if model == "transformer":
                opt = torch.optim.AdamW(net.parameters(), lr=3e-4)
            else:
                opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
            handle = None
            if name in ("every1", "every16"):
                every = 1 if name == "every1" else 16
                handle = trainsleuth.probe.attach(net, opt, every=every, run_dir=f"{tmp}/{name}")
            runs[name] = (net, opt, handle)
        for name in names:  # warm-up (the every-16 model's sampled step 0 happens here)
            _step(torch, runs[name][0], runs[name][1], ids, runs[name][2])
        for i in range(steps):
            k = i % len(names)  # every copy takes every position in turn
            order = names[k:] + names[:k]
            for name in order:
                net, opt, handle = runs[name]
                samples[name].append(_step(torch, net, opt, ids, handle))
        for _, _, handle in runs.values():
            if handle is not None:
                handle.close()
    med = {k: statistics.median(v) for k, v in samples.items()}
    mean = {k: statistics.fmean(v) for k, v in samples.items()}
    # every 16: the cost of a whole 16-step cycle (15 plain-ish steps + 1 observed step), from medians
    # so that a load spike on the shared machine cannot decide the figure
    e16 = samples["every16"]
    observed = [t for i, t in enumerate(e16) if (i + 1) % 16 == 0]  # global step i+1 (step 0 was warm-up)
    others = [t for i, t in enumerate(e16) if (i + 1) % 16 != 0]
    cycle = (15 * statistics.median(others) + statistics.median(observed or others)) / 16
    med["every16_cycle"] = cycle
    return {
        "model": model,
        "params": n_params,
        "median_s": med,
        "mean_s": mean,
        "ratio_every1": med["every1"] / med["plain"],
        "ratio_every16": cycle / med["plain"],
        "ratio_control": med["control"] / med["plain"],
        "steps": steps,
        "threads": torch.get_num_threads(),
    }


DESCRIPTION = {
    "transformer": "causal transformer, batch 4x32 tokens, AdamW",
    "cnn": "ResNet-style CNN with batch norm, batch 32x3x32x32, SGD with momentum",
}


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    out = []
    for kind in ("transformer", "cnn"):
        m = measure(steps=16 if quick else 48, model=kind)
        details = (
            f"{m['params'] / 1e6:.1f}M-param {DESCRIPTION[kind]}, CPU {m['threads']} threads; plain median "
            f"{m['median_s']['plain'] * 1e3:.0f} ms/step; {m['steps']} steps each, interleaved step by step"
        )
        cmd = f"python -m benchmarks.probe --model {kind}"
        base = f"plain training steps ({m['median_s']['plain'] * 1e3:.0f} ms median)"
        out.append(
            result(
                f"probe live-mode overhead ({kind}), attached every step",
                m["ratio_every1"],
                base,
                GOAL_EVERY_STEP,
                direction="lower",
                unit="x step time",
                details=details,
                command=cmd,
            )
        )
        out.append(
            result(
                f"probe live-mode overhead ({kind}), attached every 16th step",
                m["ratio_every16"],
                base,
                GOAL_EVERY_16,
                direction="lower",
                unit="x step time",
                details=details,
                command=cmd,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=48, help="steps per configuration (multiple of 16)")
    ap.add_argument("--model", choices=("transformer", "cnn", "both"), default="both")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="what a step's time is")
    args = ap.parse_args()
    global CPU_CLOCK
    CPU_CLOCK = args.clock == "cpu"
    for kind in ("transformer", "cnn") if args.model == "both" else (args.model,):
        m = measure(args.steps, kind)
        print(
            f"{kind} ({args.clock} time): params {m['params'] / 1e6:.1f}M  plain {m['median_s']['plain'] * 1e3:.1f} ms  "
            f"every1 {m['median_s']['every1'] * 1e3:.1f} ms ({m['ratio_every1']:.3f}x, goal <= {GOAL_EVERY_STEP})  "
            f"every16 cycle {m['median_s']['every16_cycle'] * 1e3:.1f} ms ({m['ratio_every16']:.3f}x, goal <= {GOAL_EVERY_16})  "
            f"control (a second plain copy) {m['ratio_control']:.3f}x"
        )


if __name__ == "__main__":
    main()
