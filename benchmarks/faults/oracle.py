"""Ground truth for the probe cases, measured directly with plain torch (no trainsleuth code).

This is how the benchmark's labels are checked: each broken set-up must really show its fault and each
healthy set-up must really train. The rules are deliberately simple and generous (they confirm that a
fault is present; they are not a detector): see `RULES` below for every threshold.

    python -m benchmarks.faults.oracle            # every probe and precision case: expected vs measured
    python -m benchmarks.faults.oracle CASE_ID    # one case, with the raw measurements

Runs in the interpreter that has torch (the project's .venv).
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

STEPS = 5  # optimizer steps on one fixed batch
RULES: dict[str, float] = {
    "explode_abs": 1e3,  # total gradient norm above this at the first step
    "explode_growth": 10.0,  # or the total gradient norm grows this much from first to last step
    "vanish_ratio": 1e-3,  # first weighted layer's grad norm / last weighted layer's grad norm
    "dead_fraction": 0.5,  # share of a ReLU layer's units that never fire on any probed step
    "saturated_fraction": 0.5,  # share of a tanh/sigmoid layer's outputs within 1% of the asymptotes
    "update_high": 0.1,  # ||dW|| / ||W|| of some weight matrix at the first step
    "update_low": 1e-5,  # median ||dW|| / ||W|| over dense weight matrices at the first step
    "imbalance": 100.0,  # a module's grad norm / the median of the other modules'
    "term_imbalance": 100.0,  # one loss term's grad norm on shared parameters / another's
    "not_decreasing": 0.999,  # last loss >= first loss * this
    "diverging": 1.1,  # last loss > first loss * this, rising on most steps
    "input_abs": 20.0,  # a float input with mean |x| or std above this
}

RELU_TYPES = ("ReLU", "ReLU6")
SAT_TYPES = ("Tanh", "Sigmoid")


def load_setup(path: Path) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"_oracle_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module.setup()


def _tensors(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    return []


def _finite(obj: Any) -> bool:
    import torch

    return all(bool(torch.isfinite(t).all()) for t in _tensors(obj) if t.is_floating_point())


def _loss_of(contract: dict[str, Any], model: Any, batch: Any) -> tuple[Any, dict[str, Any]]:
    import torch

    loss_fn = contract.get("loss_fn")
    if loss_fn is not None:
        out = loss_fn(model, batch)
    elif isinstance(batch, dict):
        out = model(**batch)
    elif isinstance(batch, (list, tuple)):
        out = model(*batch)
    else:
        out = model(batch)
    if loss_fn is None and not isinstance(out, torch.Tensor):
        out = out["loss"] if isinstance(out, dict) else out.loss
    if isinstance(out, dict):
        return sum(out.values()), out
    return out, {}


def measure(contract: dict[str, Any], steps: int = STEPS) -> dict[str, Any]:
    import torch

    model = contract["model"]
    batches = contract["batches"] if "batches" in contract else [contract["batch"]]
    batch = batches[0]
    optimizer = contract.get("optimizer")
    step_fn = contract.get("step_fn")
    names = {m: n for n, m in model.named_modules()}
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    m: dict[str, Any] = {
        "losses": [],
        "origin": None,
        "stale": False,
        "grad_seen": {n: False for n in params},
        "grad_nonzero": {n: False for n in params},
        "grad_nonfinite_first": False,
        "grad_norms": [],
        "changed": {n: False for n in params},
        "update_ratios": {},
        "never_active": {},
        "saturated": {},
        "term_grads": {},
        "inputs": [],
    }
    for t in _tensors(batch):
        if t.is_floating_point():
            m["inputs"].append(
                {"mean_abs": float(t.abs().mean()), "std": float(t.std()) if t.numel() > 1 else 0.0}
            )

    state: dict[str, Any] = {"step": 0, "grads": {}, "bad": []}

    def fwd_hook(mod: Any, inputs: Any, output: Any) -> None:
        name = names.get(mod, "?")
        out_ok = _finite(output)
        if not out_ok and _finite(inputs):
            state["bad"].append(name)
        kind = type(mod).__name__
        outs = [t for t in _tensors(output) if t.is_floating_point()]
        if not outs:
            return
        o = outs[0].detach()
        if kind in RELU_TYPES:
            ch = o.transpose(0, 1).reshape(o.shape[1], -1) if o.dim() > 2 else o.reshape(-1, o.shape[-1]).T
            active = (ch > 0).any(dim=1)
            prev = m["never_active"].get(name)
            m["never_active"][name] = ~active if prev is None else (prev & ~active)
        elif kind in SAT_TYPES:
            if kind == "Tanh":
                sat = (o.abs() > 0.99).float().mean()
            else:
                sat = ((o < 0.01) | (o > 0.99)).float().mean()
            m["saturated"][name] = max(m["saturated"].get(name, 0.0), float(sat))

    handles = [mod.register_forward_hook(fwd_hook) for mod in model.modules()]

    def make_param_hook(pname: str, p: Any) -> Any:
        def hook(grad: Any) -> None:
            if state["step"] > 0 and p.grad is not None and bool((p.grad != 0).any()):
                m["stale"] = True
            state["grads"][pname] = grad.detach().clone()

        return hook

    handles += [p.register_hook(make_param_hook(n, p)) for n, p in params.items()]
    try:
        model.train()
        # loss-term gradients on shared parameters, on the initial weights (no step)
        if contract.get("loss_fn") is not None:
            model.zero_grad(set_to_none=True)
            _, terms = _loss_of(contract, model, batch)
            if len(terms) > 1:
                plist = list(params.values())
                for tname, term in terms.items():
                    gs = torch.autograd.grad(term, plist, retain_graph=True, allow_unused=True)
                    m["term_grads"][tname] = {
                        pn: float(g.norm())
                        for pn, g in zip(params, gs, strict=True)
                        if g is not None and float(g.norm()) > 0
                    }
        for step in range(steps):
            state["step"] = step
            state["grads"] = {}
            state["bad"] = []
            before = {n: p.detach().clone() for n, p in params.items()}
            if step_fn is not None:
                loss = step_fn(model, batch)
            else:
                if optimizer is not None:
                    optimizer.zero_grad(set_to_none=True)
                else:
                    model.zero_grad(set_to_none=True)
                loss, _ = _loss_of(contract, model, batch)
                loss.backward()
                if optimizer is not None:
                    optimizer.step()
            m["losses"].append(float(loss.detach()) if hasattr(loss, "detach") else float(loss))
            if state["bad"] and m["origin"] is None:
                # origin: the first module (completion order) with a non-finite output from finite
                # inputs none of whose descendants did the same
                bad = state["bad"]
                for cand in bad:
                    prefix = cand + "." if cand else ""
                    if not any(o != cand and o.startswith(prefix) for o in bad):
                        m["origin"] = cand
                        break
            total = 0.0
            for n, g in state["grads"].items():
                m["grad_seen"][n] = True
                if bool((g != 0).any()):
                    m["grad_nonzero"][n] = True
                if step == 0 and not bool(torch.isfinite(g).all()) and math.isfinite(m["losses"][0]):
                    m["grad_nonfinite_first"] = True
                total += float(g.float().norm()) ** 2
            m["grad_norms"].append(math.sqrt(total))
            if step == 0:
                m["first_grads"] = {n: float(g.float().norm()) for n, g in state["grads"].items()}
            for n, p in params.items():
                if not torch.equal(before[n], p.detach()):
                    m["changed"][n] = True
                if step == 0 and p.dim() >= 2:
                    w = float(before[n].norm())
                    if w > 0:
                        m["update_ratios"][n] = float((p.detach() - before[n]).norm()) / w
    finally:
        for h in handles:
            h.remove()
    return m


def _module_grad_norms(first_grads: dict[str, float]) -> dict[str, float]:
    """Grad norm per module that owns parameters directly."""
    mods: dict[str, float] = {}
    for pname, g in first_grads.items():
        mod = pname.rpartition(".")[0]
        mods[mod] = math.sqrt(mods.get(mod, 0.0) ** 2 + g**2)
    return mods


def codes_from(m: dict[str, Any], model: Any) -> dict[str, Any]:
    """Which probe codes the measurements confirm, with the module where one applies."""
    import torch

    found: dict[str, Any] = {}
    losses = m["losses"]
    if any(not math.isfinite(x) for x in losses):
        found["nonfinite_loss"] = None
    if m["origin"] is not None:
        found["nonfinite_forward"] = m["origin"]
    if m["grad_nonfinite_first"]:
        found["nonfinite_gradient"] = None
    norms = [g for g in m["grad_norms"] if math.isfinite(g)]
    if norms and (
        norms[0] > RULES["explode_abs"]
        or (len(norms) > 1 and norms[-1] > RULES["explode_growth"] * norms[0] > 0)
    ):
        found["exploding_gradients"] = None
    weighted = [
        n
        for n, mod in model.named_modules()
        if isinstance(mod, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d))
    ]
    fg = m.get("first_grads", {})
    wg = [(n, fg.get(n + ".weight")) for n in weighted if fg.get(n + ".weight") is not None]
    if len(wg) >= 3 and all(math.isfinite(g) for _, g in wg):
        first, last = wg[0][1], wg[-1][1]
        if last > 0 and first / last < RULES["vanish_ratio"]:
            found["vanishing_gradients"] = wg[0][0]
    for name, never in m["never_active"].items():
        if float(never.float().mean()) >= RULES["dead_fraction"]:
            found.setdefault("dead_relu", name)
    for name, frac in m["saturated"].items():
        if frac >= RULES["saturated_fraction"]:
            found.setdefault("saturated_activations", name)
    nograd = [n for n in m["grad_seen"] if not m["grad_nonzero"][n]]
    if nograd:
        found["no_gradient"] = sorted({n.rpartition(".")[0] for n in nograd})
    not_updated = [n for n in m["grad_nonzero"] if m["grad_nonzero"][n] and not m["changed"][n]]
    if not_updated:
        found["params_not_updated"] = sorted({n.rpartition(".")[0] for n in not_updated})
    ratios = [r for n, r in m["update_ratios"].items() if math.isfinite(r)]
    if ratios and max(ratios) > RULES["update_high"]:
        found["update_ratio_high"] = None
    dense = [
        r
        for n, r in m["update_ratios"].items()
        if math.isfinite(r)
        and not isinstance(
            model.get_submodule(n.rpartition(".")[0] or ""), (torch.nn.Embedding, torch.nn.EmbeddingBag)
        )
    ]
    if dense and sorted(dense)[len(dense) // 2] < RULES["update_low"]:
        found["update_ratio_low"] = None
    mods = {k: v for k, v in _module_grad_norms(fg).items() if math.isfinite(v) and v > 0}
    if len(mods) >= 3:
        for name, g in mods.items():
            others = sorted(v for k, v in mods.items() if k != name)
            if g / others[len(others) // 2] >= RULES["imbalance"]:
                found.setdefault("gradient_imbalance", name)
    if len(m["term_grads"]) > 1:
        terms = m["term_grads"]
        shared = set.intersection(*(set(v) for v in terms.values()))
        if shared:
            tn = {t: math.sqrt(sum(v[p] ** 2 for p in shared)) for t, v in terms.items()}
            lo, hi = min(tn.values()), max(tn.values())
            if lo > 0 and hi / lo >= RULES["term_imbalance"]:
                found["loss_component_imbalance"] = max(tn, key=lambda k: tn[k])
    if m["stale"]:
        found["grad_not_zeroed"] = None
    if all(math.isfinite(x) for x in losses) and len(losses) > 1:
        if losses[-1] >= losses[0] * RULES["not_decreasing"]:
            found["loss_not_decreasing"] = None
        rises = sum(b > a for a, b in itertools.pairwise(losses))
        if losses[-1] > losses[0] * RULES["diverging"] and rises >= (len(losses) - 1) / 2:
            found["loss_diverging"] = None
    if any(i["mean_abs"] > RULES["input_abs"] or i["std"] > RULES["input_abs"] for i in m["inputs"]):
        found["input_not_normalized"] = None
    return found


def precision_origin(contract: dict[str, Any], rtol: float = 0.05) -> tuple[str | None, dict[str, float]]:
    """Per-module relative output error of a bf16-autocast forward against fp32; the first module
    (in execution order) beyond `rtol` whose predecessor was within it."""
    import torch

    model = contract["model"]
    batch = contract["batches"][0] if "batches" in contract else contract["batch"]
    runs: list[dict[str, Any]] = []
    for low in (False, True):
        store: dict[str, Any] = {}

        def make(name: str, store: dict[str, Any] = store) -> Any:
            def hook(mod: Any, inputs: Any, output: Any) -> None:
                out = output[0] if isinstance(output, tuple) else output
                store[name] = out.detach().float().clone()

            return hook

        handles = [mod.register_forward_hook(make(n)) for n, mod in model.named_modules() if n]
        try:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
                _loss_of(contract, model, batch)
        finally:
            for h in handles:
                h.remove()
        runs.append(store)
    errors = {n: float((runs[0][n] - runs[1][n]).norm() / (runs[0][n].norm() + 1e-12)) for n in runs[0]}
    origin, prev_ok = None, True
    for name, err in errors.items():
        if err > rtol and prev_ok:
            origin = name
            break
        prev_ok = err <= rtol
    return origin, errors


def check_case(path: Path) -> dict[str, Any]:
    import torch

    torch.use_deterministic_algorithms(False)
    contract = load_setup(path)
    m = measure(contract)
    return {"found": codes_from(m, contract["model"]), "losses": m["losses"], "measurements": m}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.faults.manifest import load_manifest

    argv = sys.argv[1:] if argv is None else argv
    manifest = load_manifest()
    bad = 0
    for case in (c for c in manifest.cases if c.kind == "precision" and (not argv or c.id in argv)):
        origin, errors = precision_origin(load_setup(case.path))
        expected_mods = [m for e in case.expect for m in (e.module or ())]
        ok = origin is None if case.healthy else origin in expected_mods
        bad += not ok
        worst = max(errors.values()) if errors else 0.0
        print(
            f"{'ok' if ok else 'MISMATCH':8} {case.id}: bf16 origin {origin!r} (expected {expected_mods or 'none'}), worst rel error {worst:.3g}"
        )
    cases = [c for c in manifest.cases if c.kind == "probe" and (not argv or c.id in argv)]
    for case in cases:
        res = check_case(case.path)
        found = res["found"]
        expected = {e.code for e in case.expect}
        missing = sorted(expected - set(found))
        problems = list(missing)
        if case.healthy and found:
            problems += sorted(found)
        origin_notes = []
        for e in case.expect:
            if e.module and e.code in ("nonfinite_forward",) and found.get(e.code) not in e.module:
                origin_notes.append(f"{e.code} origin {found.get(e.code)!r} not in {e.module}")
        status = "ok" if not problems and not origin_notes else "MISMATCH"
        bad += status != "ok"
        losses = ", ".join(f"{x:.4g}" for x in res["losses"])
        print(
            f"{status:8} {case.id}: expected {sorted(expected) or '[healthy]'} found {found} | loss {losses}"
        )
        for note in origin_notes:
            print(f"         {note}")
        if argv:
            print(res["measurements"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
