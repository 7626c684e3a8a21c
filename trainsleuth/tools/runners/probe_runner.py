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
TB_LIMIT = 12000


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
        import _ts_probe_contract

        if isinstance(exc, _ts_probe_contract.ContractViolation):
            raise
        kind = "out_of_memory" if _is_oom(exc) else "step_raised"
        raise StepError(
            kind, f"{what} raised {type(exc).__name__}: {exc}", tb=traceback.format_exc()[-TB_LIMIT:]
        ) from None


def _model_loss(model, batch, torch, core):
    loss = core.extract_loss(_call_model(model, batch, torch))
    if loss is None:
        raise ValueError("the model's output carries no loss")
    return loss


def _replay_plan(root_call, batch, core):
    """How the model was called in the user's step, as paths into the batch: [(arg slot, batch path)].
    None when an input is not a tensor of the batch (the model cannot be re-called on other batches)."""
    if root_call is None:
        return None
    args, kwargs = root_call
    tens = core.tens
    by_id = {id(t): path for path, t in tens.leaf_paths(batch)}
    by_view = {}
    for path, t in tens.leaf_paths(batch):
        by_view[(tens.storage_ptr(t), tuple(t.shape), t.storage_offset())] = path
    plan = []
    for slot, value in [(("a", i), a) for i, a in enumerate(args)] + [
        (("k", k), v) for k, v in kwargs.items()
    ]:
        if not isinstance(value, torch_tensor_type(core)):
            if value is None or isinstance(value, (bool, int, float, str)):
                plan.append((slot, ("const", value)))
                continue
            return None
        path = by_id.get(id(value))
        if path is None:
            path = by_view.get((tens.storage_ptr(value), tuple(value.shape), value.storage_offset()))
        if path is None:
            return None
        plan.append((slot, ("batch", path)))
    return plan


def torch_tensor_type(core):
    return core.torch.Tensor


def _replay(model, plan, batch, core):
    args, kwargs = [], {}
    for (kind, key), (src, val) in plan:
        value = core.tens.get_path(batch, val) if src == "batch" else val
        if kind == "a":
            args.append(value)
        else:
            kwargs[key] = value
    return model(*args, **kwargs)


def _eval_mode_check(contract, model, batch, core):
    """Run the user's eval_fn once and see which dropout / batch-norm layers are still training."""
    seen = {}
    mods = core.mode_sensitive_modules(model)

    def pre(module, args):
        if "active" not in seen:
            seen["active"] = [n for n, m in mods if m.training]

    flags = [(m, m.training) for m in model.modules()]
    h = model.register_forward_pre_hook(pre)
    try:
        _user_call("eval_fn", contract["eval_fn"], model, batch)
    finally:
        h.remove()
        for m, f in flags:
            m.training = f
    if "active" not in seen:
        return {"active": [], "note": "eval_fn did not call the model"}
    return {"active": seen["active"][:10], "n_active": len(seen["active"])}


def drive(contract, steps, core, torch):
    """Take `steps` probe steps on the first batch and return the statistics summary."""
    import _ts_probe_accum
    import _ts_probe_contract
    import _ts_probe_watch

    model = contract["model"]
    optimizer = contract.get("optimizer")
    step_fn = contract.get("step_fn")
    loss_fn = contract.get("loss_fn")
    scheduler = contract.get("scheduler")
    batches = contract["batches"]
    notes = []
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = None
    fixed = _to_device(batches[0], device, torch)
    mode = "step_fn" if step_fn is not None else ("loss_fn" if loss_fn is not None else "model_loss")
    accumulation = None
    if step_fn is not None and optimizer is not None:
        ref = (
            (lambda m, b: loss_fn(m, b))
            if loss_fn is not None
            else (lambda m, b: _model_loss(m, b, torch, core))
        )
        accumulation = _ts_probe_accum.check(contract, model, optimizer, fixed, ref)
        if accumulation and accumulation.get("skipped"):
            notes.append("Gradient accumulation was not checked: " + accumulation["skipped"] + ".")
    elif step_fn is None:
        notes.append(
            f"In {mode} mode the probe zeroes gradients and steps the optimizer itself, so the user's own "
            "zero_grad, accumulation and scheduler calls are not seen; give step_fn to check them."
        )
    rec = core.Recorder(model, optimizer).attach()
    # what tells the regime: optimizers, networks, the code after each step (step_fn only), the loss graph
    regime = _ts_probe_watch.RegimeWatch.for_recorder(rec, after_step=step_fn is not None).attach()
    pre_existing = [n for n, p in model.named_parameters() if p.grad is not None]
    hooks = []
    state = {"snap": None}
    if step_fn is not None and optimizer is not None:
        hooks.append(
            optimizer.register_step_pre_hook(lambda o, a, k: state.update(snap=rec.snapshot_params()))
        )
        hooks.append(optimizer.register_step_post_hook(lambda o, a, k: rec.measure_updates(state["snap"])))
    contract_findings = []
    stopped = None
    try:
        for k in range(steps):
            rec.begin_step(k)
            regime.begin_step(k)
            watch = None
            if k == 0:
                watch = _ts_probe_contract.LossWatch(rec, fixed, k)
                rec.watch_producers = True
            try:
                if watch is not None:
                    watch.__enter__()
                try:
                    if step_fn is not None:
                        snap = rec.snapshot_params() if optimizer is None else None
                        loss = _user_call("step_fn", step_fn, model, fixed)
                        terms = None
                        if isinstance(loss, dict):
                            terms = loss
                            loss = sum(v for v in loss.values())
                    else:
                        if optimizer is not None:
                            optimizer.zero_grad(set_to_none=True)
                        for _, p in model.named_parameters():
                            p.grad = None
                        total, terms = _user_call(
                            "the forward pass and loss" if loss_fn is None else "loss_fn",
                            _loss_terms,
                            contract,
                            model,
                            fixed,
                            torch,
                            core,
                        )
                        if terms and k == 0 and bool(torch.isfinite(total.detach())):
                            _user_call("computing per-term gradients", rec.term_gradients, terms)
                        rec.before_backward(total)
                        _user_call("backward", total.backward)
                        snap = None
                        if optimizer is not None:
                            snap = rec.snapshot_params()
                            _user_call("optimizer.step", optimizer.step)
                            rec.measure_updates(snap)
                            if scheduler is not None:
                                _user_call("scheduler.step", scheduler.step)
                        loss = total
                finally:
                    regime.close_window()  # before the loss watch's mode leaves the stack
                    if watch is not None:
                        watch.__exit__(None, None, None)
                        rec.watch_producers = False
                        contract_findings += watch.findings
            except _ts_probe_contract.ContractViolation as exc:
                rec.active = False
                contract_findings.append(exc.finding)
                stopped = f"probe step {k} was stopped before the loss ran: {exc.finding['message']}"
                break
            ok = rec.end_step(loss, snap, terms)
            regime.end_step(k)
            if not ok:
                stopped = f"stopped after probe step {k}: the loss or a gradient became NaN/Inf, so later steps would be meaningless"
                break
        regime.detach()
        # activation statistics over the other batches (forward only, no parameter change)
        if rec.nonfinite_step is None and stopped is None and len(batches) > 1:
            plan = _replay_plan(rec.root_call, fixed, core) if step_fn is not None else None
            if step_fn is not None and plan is None:
                notes.append(
                    "The other batches got no forward-only pass: step_fn calls the model with inputs that "
                    "are not tensors of the batch, so the probe cannot call it the same way."
                )
            else:
                try:
                    with torch.no_grad():
                        for j, b in enumerate(batches[1:MAX_ACTIVATION_BATCHES]):
                            rec.begin_step(steps + j)
                            b = _to_device(b, device, torch)
                            if step_fn is not None:
                                _replay(model, plan, b, core)
                            elif loss_fn is not None:
                                loss_fn(model, b)
                            else:
                                _call_model(model, b, torch)
                            rec.active = False
                except Exception as exc:
                    rec.active = False
                    notes.append(
                        f"The probe's own forward-only pass over the other batches failed ({type(exc).__name__}: "
                        f"{exc}); activation statistics come from the first batch only."
                    )
        eval_check = None
        if contract.get("eval_fn") is not None and stopped is None:
            eval_check = _eval_mode_check(contract, model, fixed, core)
    finally:
        regime.detach()
        rec.detach()
        for h in hooks:
            h.remove()
    stats = rec.summary(mode=mode, fixed_batch=True)
    stats["regime_obs"] = regime.observations()
    stats["pre_existing_grads"] = pre_existing[:20]
    stats["device"] = str(device) if device is not None else "cpu"
    stats["contract_findings"] = contract_findings
    stats["accumulation"] = accumulation
    stats["eval_mode_check"] = eval_check
    stats["stopped"] = stopped
    stats["requested_steps"] = steps
    stats["notes"] = notes
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
            "traceback": traceback.format_exc()[-TB_LIMIT:],
        }
        _ts_entrypoint.write_result(args.result, payload)
        return 0
    notes = stats.get("notes", [])
    stats["regimes"] = rules.regimes.detect(stats)
    findings = rules.analyze(stats, notes)
    internal = stats.get("internal_errors") or []
    if internal:
        notes.append(
            f"The probe's own measurements failed {len(internal)} time(s) on this model (first: {internal[0]}); "
            "what they would have measured is missing from this report, so a clean report is not a clean bill "
            "of health. Please report it."
        )
    payload = {
        "ok": True,
        "findings": findings,
        "stats": stats,
        "table": core.module_table(stats),
        "layer_grad_rms": rules.layer_grad_rms(stats),
        "unknown_keys": contract.get("unknown_keys", []),
        "notes": notes,
        "regimes": stats["regimes"],
        "regime": rules.regimes.sentence(stats["regimes"]),
        "stopped": stats.get("stopped"),
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
