"""GPU check: the probe on CUDA (real architectures, healthy and broken), compare_precision with bf16 and
fp16 autocast on CUDA, and live mode on a CUDA model under bf16 autocast. Prints one JSON summary.

Run on a machine with a GPU, from the repository root: `python benchmarks/gpu/check.py` (trainsleuth and
its dependencies importable; the model code needs only torch and transformers)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
PY = sys.executable


def probe(entry: str) -> dict:
    out = subprocess.run([PY, "-m", "trainsleuth", "probe", entry, "--json", "--python", PY],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    try:
        data = json.loads(out.stdout)
    except json.JSONDecodeError:
        return {"entry": entry, "exit": out.returncode, "error": (out.stdout + out.stderr)[-1500:]}
    codes = sorted({(f["code"], f["severity"]) for f in data.get("findings", [])})
    return {"entry": entry, "exit": out.returncode, "device": data.get("device") or data.get("env", {}),
            "findings": codes, "modules": sorted({f.get("module") or "" for f in data.get("findings", [])})[:6]}  # fmt: skip


def precision(entry: str) -> dict:
    args = json.dumps({"entrypoint": entry, "device": "cuda", "python": PY})
    out = subprocess.run([PY, "-m", "trainsleuth", "client", "call", "compare_precision", "--args-json", args, "--json",
                          "--workspace", str(ROOT)], capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    try:
        s = json.loads(out.stdout)["structured"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return {"entry": entry, "exit": out.returncode, "error": (out.stdout + out.stderr)[-1500:]}
    return {"entry": entry, "device": s.get("device"), "unsupported": s.get("unsupported"),
            "findings": [(f["code"], f["severity"], f.get("module"), f["evidence"].get("dtype"),
                          f["evidence"].get("lost_between_modules")) for f in s.get("findings", [])],
            "results": [(r["dtype"], r["loss_rel_error"], r["first_output_beyond"]) for r in s.get("results", [])]}  # fmt: skip


def live() -> dict:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    import trainsleuth.probe

    out = {}
    for every in (1, 16):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=1000)).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        ids = torch.randint(0, 1000, (8, 64), device="cuda")
        run = Path(tempfile.mkdtemp()) / f"live{every}"
        with trainsleuth.probe.attach(model, opt, every=every, run_dir=run) as h:
            for _ in range(32):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(ids, labels=ids).loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                h.record_loss(loss)
        read = subprocess.run([PY, "-m", "trainsleuth", "probe", "--read", str(run), "--json"],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
        try:
            data = json.loads(read.stdout)
            out[f"every{every}"] = {"exit": read.returncode, "findings": sorted({f["code"] for f in data.get("findings", [])}),
                                    "steps": len((run / "steps.jsonl").read_text().splitlines())}  # fmt: skip
        except json.JSONDecodeError:
            out[f"every{every}"] = {"exit": read.returncode, "error": (read.stdout + read.stderr)[-1500:]}
    return out


def main() -> None:
    import cuda_entries
    import torch

    summary: dict = {
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "healthy": [],
        "broken": [],
    }
    for name in cuda_entries.HEALTHY:
        summary["healthy"].append(probe(f"benchmarks/gpu/cuda_entries.py:{name}"))
    for name, code in cuda_entries.BROKEN.items():
        summary["broken"].append({**probe(f"benchmarks/gpu/cuda_entries.py:{name}"), "expected": code})
    summary["precision"] = [
        precision(f"examples/distributed/bf16_sensitive.py:{fn}")
        for fn in ("entry", "between_modules", "healthy")
    ]
    summary["live"] = live()
    print(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
