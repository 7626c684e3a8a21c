"""Live-mode probe overhead: training steps of a ~10M-parameter transformer on CPU, plain vs attached.

Three configurations run interleaved, round after round, on the same model, data and thread count, so
machine noise hits all of them alike: plain steps, `trainsleuth.probe.attach(every=1)` and
`attach(every=16)`. The figure is the ratio of median step times. Goals: <= 1.25x at every step,
<= 1.05x at every 16th step.

    python -m benchmarks.probe [--rounds 5] [--steps 16]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from benchmarks.common import BenchResult, result

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
    ids = torch.randint(0, 8000, (8, 65))
    return model, opt, ids


def _time_steps(torch: Any, model: Any, opt: Any, ids: Any, steps: int, handle: Any) -> list[float]:
    from torch import nn

    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if handle is not None:
            handle.record_loss(loss)
        times.append(time.perf_counter() - t0)
    return times


def measure(rounds: int = 5, steps: int = 16) -> dict[str, Any]:
    import torch

    import trainsleuth.probe

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    model, opt, ids = _build(torch)
    n_params = sum(p.numel() for p in model.parameters())
    _time_steps(torch, model, opt, ids, 3, None)  # warm-up
    samples: dict[str, list[float]] = {"plain": [], "every1": [], "every16": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for name in ("plain", "every1", "every16"):
                handle = None
                if name != "plain":
                    every = 1 if name == "every1" else 16
                    handle = trainsleuth.probe.attach(model, opt, every=every, run_dir=f"{tmp}/{name}{r}")
                samples[name] += _time_steps(torch, model, opt, ids, steps, handle)
                if handle is not None:
                    handle.close()
    med = {k: statistics.median(v) for k, v in samples.items()}
    # the every-16 figure averages over whole 16-step cycles: the sampled step is part of its cost
    mean = {k: statistics.fmean(v) for k, v in samples.items()}
    return {
        "params": n_params,
        "median_s": med,
        "mean_s": mean,
        "ratio_every1": med["every1"] / med["plain"],
        "ratio_every16": mean["every16"] / mean["plain"],
        "rounds": rounds,
        "steps": steps,
        "threads": torch.get_num_threads(),
    }


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    m = measure(rounds=2 if quick else 5, steps=16)
    details = (
        f"{m['params'] / 1e6:.1f}M-param transformer, batch 8x64 tokens, AdamW, CPU {m['threads']} threads; "
        f"plain median {m['median_s']['plain'] * 1e3:.0f} ms/step; {m['rounds']} interleaved rounds x {m['steps']} steps"
    )
    cmd = "python -m benchmarks.probe"
    return [
        result(
            "probe live-mode overhead, attached every step",
            m["ratio_every1"],
            f"plain training steps ({m['median_s']['plain'] * 1e3:.0f} ms median)",
            GOAL_EVERY_STEP,
            direction="lower",
            unit="x step time",
            details=details,
            command=cmd,
        ),
        result(
            "probe live-mode overhead, attached every 16th step",
            m["ratio_every16"],
            f"plain training steps ({m['mean_s']['plain'] * 1e3:.0f} ms mean)",
            GOAL_EVERY_16,
            direction="lower",
            unit="x step time",
            details=details,
            command=cmd,
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=16)
    args = ap.parse_args()
    m = measure(args.rounds, args.steps)
    print(
        f"params {m['params'] / 1e6:.1f}M  plain {m['median_s']['plain'] * 1e3:.1f} ms  "
        f"every1 {m['median_s']['every1'] * 1e3:.1f} ms ({m['ratio_every1']:.3f}x, goal <= {GOAL_EVERY_STEP})  "
        f"every16 mean {m['mean_s']['every16'] * 1e3:.1f} ms ({m['ratio_every16']:.3f}x, goal <= {GOAL_EVERY_16})"
    )


if __name__ == "__main__":
    main()
