"""The block fast path (learned line templates) gives exactly what the line parsers give."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from trainsleuth.tools.logs import collect
from trainsleuth.tools.logs.fastpath import TemplateEngine, build_template
from trainsleuth.tools.logs.textparse import parse_line_auto


def _mixed_lines(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for step in range(1, n + 1):
        loss = 2 + 5 / (1 + step / 300) + rng.gauss(0, 0.05)
        kind = step % 7
        if step == 1500:
            lines.append(f"step={step} loss=nan lr=1.0e-04 gnorm=inf")
        elif step == 1700:
            lines.append(f"step={step} loss=N/A lr=1.0e-04 gnorm=0.5")  # not a number in a number slot
        elif kind in (0, 1, 2):
            lines.append(
                f" iteration {step:8d}/   90000 | consumed samples: {step * 64:9d} | lm loss: {loss:.6E} | "
                f"loss scale: 65536.0 | grad norm: {abs(rng.gauss(1, 0.2)):.3f} | number of nan iterations:   0 |"
            )
        elif kind == 3:
            lines.append(json.dumps({"step": step, "train": {"loss": round(loss, 5)}, "lr": 1e-4}))
        elif kind == 4:
            lines.append(f"step={step} loss={loss:.5f} lr=1.0e-04 gnorm={abs(rng.gauss(1, 0.2)):.4f}")
        elif kind == 5:
            lines.append(f"[2024-05-01 12:00:{step % 60:02d}] INFO prefetched {rng.randint(1, 999)} batches")
        else:
            lines.append(f"iter {step}: loss {loss:.4f}, time {90 + rng.random() * 20:.2f}ms, mfu 31.20%")
    return lines


def _expected(lines: list[str]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for line in lines:
        for step, metrics, _source in parse_line_auto(line):
            assert step is not None
            for name, value in metrics.items():
                out.setdefault(name, []).append((step, value))
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_fast_path_matches_line_parsers(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from trainsleuth.tools.logs import source

    monkeypatch.setattr(source, "BLOCK", 64 << 10)  # many blocks, so templates do the bulk of the work
    lines = _mixed_lines(6000)
    p = tmp_path / "mixed.log"
    p.write_text("\n".join(lines) + "\n")
    collector, _, stats = collect(p, capacity=100_000)
    expected = _expected(lines)
    assert set(collector.series) == set(expected)
    for name, pts in expected.items():
        s = collector.series[name]
        finite = sorted((st, v) for st, v in pts if math.isfinite(v))
        got = sorted(zip(s.buckets.lists().first, s.buckets.lists().mean, strict=True))
        assert len(got) == len(finite), name
        assert all(g[0] == e[0] and _same(g[1], e[1]) for g, e in zip(got, finite, strict=True)), name
        assert s.nonfinite == sum(not math.isfinite(v) for _, v in pts), name
    assert collector.series["loss"].nonfinite_first_step == 1500
    assert stats.lines == 6000


def test_templates_are_learnt_for_repeated_shapes() -> None:
    engine = TemplateEngine(parse_line_auto)
    for line in _mixed_lines(50):
        engine.observe(line)
    assert len(engine.active) >= 4
    megatron = build_template(_mixed_lines(3)[0], parse_line_auto)
    assert megatron.regex is not None and megatron.step_slot == 0
    assert {name for _, name in megatron.slots} == {
        "consumed samples", "lm loss", "loss scale", "grad norm", "number of nan iterations"
    }  # fmt: skip
    # lines with error words never become templates: they must reach the error scanner
    assert (
        build_template("RuntimeError: CUDA out of memory at step 5 loss=1.0", parse_line_auto).regex is None
    )
