"""Standalone gradient-probe runner: `python probe_runner.py --result OUT.json --entrypoint SPEC [--steps N]`.

Runs in the user's interpreter with only torch and the standard library. Loads the entrypoint
(`_ts_entrypoint`), takes a few real steps on one fixed batch with the probe's hooks attached
(`_ts_probe_core`), applies the rules (`_ts_probe_rules`) and writes one JSON report.
"""

import argparse
import os
import platform
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import _ts_entrypoint  # noqa: E402

MAX_ACTIVATION_BATCHES = 8


class StepError(Exception):
    def __init__(self, kind, message, key=None, tb=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.key = key
        self.tb = tb

    def to_json(self):
        return {"kind": self.kind, "message": self.message, "key": self.key, "traceback": self.tb}


def _is_oom(exc):
    text = f"{type(exc).__name__}: {exc}".lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "outofmemory" in text


def _to_device(batch, device, torch):
    if device is None:
        return batch
    if isinstance(batch, torch.Tensor):
        return batch.to(device) if batch.device != device else batch
    if isinstance(batch, dict):
        return {k: _to_device(v, device, torch) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device, torch) for v in batch)
    return batch


def _call_model(model, batch, torch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (list, tuple)):
        return model(*batch)
    return model(batch)


def _loss_terms(contract, model, batch, torch, core):
    """Return (total loss tensor, {name: term} or None)."""
    loss_fn = contract.get("loss_fn")
    if loss_fn is not None:
        out = loss_fn(model, batch)
        where = "loss_fn"
    else:
        out = _call_model(model, batch, torch)
        where = "model output"
        loss = core.extract_loss(out)
        if loss is None:
            raise StepError(
                "contract_error",
                f"without 'loss_fn' the model's output must have .loss, ['loss'] or be a scalar; got "
                f"{type(out).__name__}. Return a 'loss_fn' from the entrypoint",
                key="loss_fn",
            )
        out = loss
    if isinstance(out, dict):
        terms = {}
        for k, v in out.items():
            if not isinstance(v, torch.Tensor) or v.numel() != 1:
                raise StepError(
                    "contract_error",
                    f"loss_fn returned a dict whose term {k!r} is not a scalar tensor",
                    key="loss_fn",
                )
            terms[str(k)] = v.reshape(())
        if not terms:
            raise StepError("contract_error", "loss_fn returned an empty dict", key="loss_fn")
        total = sum(terms.values())
        return total, terms
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise StepError(
            "contract_error",
            f"{where} must be a scalar loss tensor (or a dict of scalar terms), got {shape}",
            key="loss_fn",
        )
    if not out.requires_grad:
        raise StepError(
            "contract_error",
            f"the loss from {where} does not require grad: no parameter can receive a gradient "
            "(is the whole computation under torch.no_grad() or detached?)",
            key="loss_fn",
        )
    return out.reshape(()), None


def _user_call(what, fn, *args):
    try:
        return fn(*args)
    except StepError:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        kind = "out_of_memory" if _is_oom(exc) else "step_raised"
        raise StepError(
            kind, f"{what} raised {type(exc).__name__}: {exc}", tb=traceback.format_exc()[-3000:]
        ) from None


def drive(contract, steps, core, torch):
    """Take `steps` probe steps on the first batch and return the statistics summary."""
    model = contract["model"]
    optimizer = contract.get("optimizer")
    step_fn = contract.get("step_fn")
    batches = contract["batches"]
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = None
    fixed = _to_device(batches[0], device, torch)
    mode = "step_fn" if step_fn is not None else ("loss_fn" if contract.get("loss_fn") else "model_loss")
    rec = core.Recorder(model, optimizer).attach()
    pre_existing = [n for n, p in model.named_parameters() if p.grad is not None]
    try:
        for k in range(steps):
            rec.begin_step(k)
            if step_fn is not None:
                snap = rec.snapshot_params()
                loss = _user_call("step_fn", step_fn, model, fixed)
                terms = None
                if isinstance(loss, dict):
                    terms = loss
                    loss = sum(v for v in loss.values())
                ok = rec.end_step(loss, snap, terms)
            else:
                if optimizer is not None:
                    optimizer.zero_grad(set_to_none=True)
                for _, p in model.named_parameters():
                    p.grad = None
                total, terms = _user_call(
                    "the forward pass and loss" if contract.get("loss_fn") is None else "loss_fn",
                    _loss_terms,
                    contract,
                    model,
                    fixed,
                    torch,
                    core,
                )
                if terms and k == 0 and bool(torch.isfinite(total.detach())):
                    _user_call("computing per-term gradients", rec.term_gradients, terms)
                _user_call("backward", total.backward)
                snap = None
                if optimizer is not None:
                    snap = rec.snapshot_params()
                    _user_call("optimizer.step", optimizer.step)
                ok = rec.end_step(total, snap, terms)
            if not ok:
                break  # after the first non-finite step every later number is garbage
        # activation statistics over the other batches (forward only, no parameter change)
        if rec.nonfinite_step is None and len(batches) > 1:
            with torch.no_grad():
                for j, b in enumerate(batches[1:MAX_ACTIVATION_BATCHES]):
                    rec.begin_step(steps + j)
                    rec.paused = False
                    b = _to_device(b, device, torch)
                    if step_fn is None and contract.get("loss_fn") is not None:
                        _user_call("loss_fn", contract["loss_fn"], model, b)
                    else:
                        _user_call("the forward pass", _call_model, model, b, torch)
                    rec.active = False
    finally:
        rec.detach()
    mode_fixed = True
    stats = rec.summary(mode=mode, fixed_batch=mode_fixed)
    stats["pre_existing_grads"] = pre_existing[:20]
    stats["device"] = str(device) if device is not None else "cpu"
    return stats


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--result", required=True)
    ap.add_argument("--entrypoint", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--cwd", default=None)
    args = ap.parse_args(argv)
    started = time.time()
    payload = {"ok": False}  # type: dict
    try:
        import torch
    except ImportError as exc:
        payload["error"] = {
            "kind": "no_torch",
            "message": f"torch is not installed in the target interpreter {sys.executable} ({exc})",
        }
        _ts_entrypoint.write_result(args.result, payload)
        return 0
    import _ts_probe_core as core
    import _ts_probe_rules as rules

    try:
        contract = _ts_entrypoint.load_contract(args.entrypoint, args.cwd)
        stats = drive(contract, max(1, args.steps), core, torch)
    except (_ts_entrypoint.EntrypointError, StepError) as exc:
        payload["error"] = exc.to_json()
        _ts_entrypoint.write_result(args.result, payload)
        return 0
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        kind = "out_of_memory" if _is_oom(exc) else "runner_failed"
        payload["error"] = {
            "kind": kind,
            "message": f"the probe failed: {type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-3000:],
        }
        _ts_entrypoint.write_result(args.result, payload)
        return 0
    findings = rules.analyze(stats)
    payload = {
        "ok": True,
        "findings": findings,
        "stats": stats,
        "table": core.module_table(stats),
        "layer_grad_rms": rules.layer_grad_rms(stats),
        "unknown_keys": contract.get("unknown_keys", []),
        "environment": {
            "python": sys.executable,
            "python_version": platform.python_version(),
            "torch": torch.__version__,
            "cuda_available": bool(torch.cuda.is_available()),
        },
        "duration_s": round(time.time() - started, 3),
    }
    _ts_entrypoint.write_result(args.result, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
