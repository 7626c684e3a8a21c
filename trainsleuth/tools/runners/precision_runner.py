"""fp32 against reduced-precision autocast, module by module (torch + standard library only).

Runs one forward/backward of the entrypoint's first batch in fp32 and again under
`torch.autocast(device, dtype)` for bf16 and fp16, from the same weights and the same random
seed, recording each module's output (forward hooks) and each parameter's gradient (tensor hooks).
Writes the per-module relative errors; the server decides what is beyond tolerance.
"""

import argparse
import copy
import math
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import _ts_dist_common as common  # noqa: E402
import _ts_entrypoint as ep  # noqa: E402

SEED = 1234
MAX_ELEMENTS = 32_000_000  # per captured tensor; larger outputs are summarised as skipped


def _first_tensor(out, torch, depth=0):
    if isinstance(out, torch.Tensor):
        return out
    if depth > 4:
        return None
    if isinstance(out, dict):
        for key in ("logits", "last_hidden_state", "loss"):
            if isinstance(out.get(key), torch.Tensor):
                return out[key]
        for v in out.values():
            t = _first_tensor(v, torch, depth + 1)
            if t is not None:
                return t
        return None
    if isinstance(out, (tuple, list)):
        for v in out:
            t = _first_tensor(v, torch, depth + 1)
            if t is not None:
                return t
        return None
    for key in ("logits", "last_hidden_state"):
        t = getattr(out, key, None)
        if isinstance(t, torch.Tensor):
            return t
    return None


def autocast_support(torch, device_type, dtype):
    """None when autocast with `dtype` works on `device_type`, else the reason it does not."""
    if device_type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        return "this GPU does not support bf16"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autocast(device_type, dtype=dtype):
                a = torch.ones(4, 4, device=device_type)
                out = torch.mm(a, a)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
    for w in caught:
        text = str(w.message)
        if "not supported" in text or "Disabling autocast" in text:
            return text
    if out.dtype != dtype:
        return f"autocast on {device_type} ran matmul in {out.dtype}, not {dtype}"
    return None


def run_once(torch, model, batch, loss_fn, step_fn, init_state, opt, opt_state, device_type, dtype):
    model.load_state_dict(init_state)
    if opt is not None and opt_state is not None:
        opt.load_state_dict(opt_state)
    model.zero_grad(set_to_none=True)
    grads: dict = {}
    rec = record_outputs(torch, model)
    handles = rec["handles"]
    for pname, p in model.named_parameters():
        if not p.requires_grad:
            continue

        def make_bwd(pname=pname):
            def hook(g):
                g32 = g.detach().to("cpu", torch.float32)
                grads[pname] = g32.clone() if pname not in grads else grads[pname] + g32
                return None

            return hook

        handles.append(p.register_hook(make_bwd()))
    torch.manual_seed(SEED)
    try:
        if step_fn is not None:
            with torch.autocast(device_type, dtype=dtype or torch.float32, enabled=dtype is not None):
                loss = step_fn(model, batch)
        else:
            with torch.autocast(device_type, dtype=dtype or torch.float32, enabled=dtype is not None):
                loss = common.compute_loss(model, batch, loss_fn)
            loss.backward()
    finally:
        for h in handles:
            h.remove()
    loss_value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
    return {
        "loss": loss_value,
        "outputs": rec["outputs"],
        "inputs": rec["inputs"],
        "order": rec["order"],
        "grads": grads,
        "types": rec["types"],
    }


def record_outputs(torch, model):
    """Forward hooks on every module that keep its first floating output and input, in call order.

    The input too: precision lost in forward code between modules (a subtraction that is no module)
    shows as an input that departs while every earlier output stayed close.
    """
    rec: dict = {"outputs": {}, "inputs": {}, "order": [], "types": {}, "handles": []}
    outputs, inputs, order = rec["outputs"], rec["inputs"], rec["order"]

    def make_fwd(name):
        def hook(_m, inp, out):
            if name in outputs:
                return
            t = _first_tensor(out, torch)
            if t is None or not t.is_floating_point():
                return
            order.append(name)
            i = _first_tensor(inp, torch)
            if i is not None and i.is_floating_point() and i.numel() <= MAX_ELEMENTS:
                inputs[name] = i.detach().to("cpu", torch.float32).clone()
            if t.numel() > MAX_ELEMENTS:
                outputs[name] = None
                return
            outputs[name] = t.detach().to("cpu", torch.float32).clone()

        return hook

    for name, mod in model.named_modules():
        label = name or "<model>"
        rec["types"][label] = type(mod).__name__
        rec["handles"].append(mod.register_forward_hook(make_fwd(label)))
    return rec


def compare(torch, ref, low, model):
    rows = []
    for name in ref["order"]:
        a = ref["outputs"].get(name)
        b = low["outputs"].get(name)
        if a is None or b is None:
            continue
        max_abs, rel = common.rel_error(b, a)
        ia, ib = ref.get("inputs", {}).get(name), low.get("inputs", {}).get(name)
        in_rel = (
            common.rel_error(ib, ia)[1]
            if ia is not None and ib is not None and ia.shape == ib.shape
            else None
        )
        rows.append(
            {
                "module": name,
                "type": ref["types"].get(name),
                "input_rel_error": None if in_rel is None else common.jsonable(in_rel),
                "input_norm_fp32": None if in_rel is None else common.jsonable(ia.double().norm()),
                "output_rel_error": common.jsonable(rel),
                "output_max_abs_error": common.jsonable(max_abs),
                "output_norm_fp32": common.jsonable(a.double().norm()),
                "nonfinite_low": bool(not torch.isfinite(b).all()),
            }
        )
    # gradients grouped by the module that owns the parameter directly
    by_module: dict = {}
    for pname, _p in model.named_parameters():
        mod = pname.rpartition(".")[0] or "<model>"
        by_module.setdefault(mod, []).append(pname)
    grad_rows = {}
    for mod, pnames in by_module.items():
        pa = [ref["grads"][n].flatten() for n in pnames if n in ref["grads"] and n in low["grads"]]
        pb = [low["grads"][n].flatten() for n in pnames if n in ref["grads"] and n in low["grads"]]
        if not pa:
            continue
        a = torch.cat(pa)
        b = torch.cat(pb)
        max_abs, rel = common.rel_error(b, a)
        grad_rows[mod] = {
            "grad_rel_error": common.jsonable(rel),
            "grad_max_abs_error": common.jsonable(max_abs),
            "grad_norm_fp32": common.jsonable(a.double().norm()),
            "grad_nonfinite_low": bool(not torch.isfinite(b).all()),
        }
    seen = set()
    for row in rows:
        if row["module"] in grad_rows:
            row.update(grad_rows[row["module"]])
            seen.add(row["module"])
    for mod, g in grad_rows.items():
        if mod not in seen:
            rows.append({"module": mod, "type": ref["types"].get(mod), **g})
    la, lb = ref.get("loss"), low.get("loss")
    if la is None or lb is None:  # a replayed forward: no loss to compare
        loss_rel = None
    else:
        loss_rel = abs(lb - la) / max(abs(la), 1e-12) if math.isfinite(lb) else math.inf
    return {
        "loss_fp32": common.jsonable(la),
        "loss_low": common.jsonable(lb),
        "loss_rel_error": None if loss_rel is None else common.jsonable(loss_rel),
        "modules": rows,
        "execution_order": ref["order"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--result", required=True)
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    try:
        import torch

        torch.manual_seed(SEED)
        contract = ep.load_contract(args.entrypoint, os.getcwd())
        model = contract["model"]
        batch = contract["batches"][0]
        params = list(model.parameters())
        model_device = params[0].device if params else torch.device("cpu")
        if args.device == "auto":
            device = model_device
        else:
            device = torch.device(args.device)
            if device.type == "cuda" and not torch.cuda.is_available():
                raise ep.EntrypointError(
                    "contract_error", "device 'cuda' was asked for but CUDA is not available"
                )
            model.to(device)
        batch = common.to_device(batch, device)
        device_type = device.type
        step_fn = contract.get("step_fn")
        loss_fn = contract.get("loss_fn")
        opt = contract.get("optimizer")
        init_state = copy.deepcopy(model.state_dict())
        opt_state = copy.deepcopy(opt.state_dict()) if opt is not None else None
        model.train()
        ref = run_once(torch, model, batch, loss_fn, step_fn, init_state, opt, opt_state, device_type, None)
        results = {}
        unsupported = {}
        names = {"bf16": torch.bfloat16, "fp16": torch.float16}
        for label in [d.strip() for d in args.dtypes.split(",") if d.strip()]:
            dtype = names[label]
            reason = autocast_support(torch, device_type, dtype)
            if reason:
                unsupported[label] = reason
                continue
            low = run_once(
                torch, model, batch, loss_fn, step_fn, init_state, opt, opt_state, device_type, dtype
            )
            results[label] = compare(torch, ref, low, model)
        model.load_state_dict(init_state)
        payload = {
            "ok": True,
            "device": str(device),
            "torch": torch.__version__,
            "used_step_fn": step_fn is not None,
            "results": results,
            "unsupported": unsupported,
        }
    except ep.EntrypointError as exc:
        payload = {"ok": False, "error": exc.to_json()}
    except Exception as exc:
        payload = ep.unexpected_failure(exc)
    ep.write_result(args.result, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
