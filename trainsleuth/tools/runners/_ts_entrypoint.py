"""Load and validate a probe entrypoint (`file.py:function` or `package.module:function`).

Standard library only at import time (torch is imported when the contract is checked), because
this runs inside the user's interpreter. Errors carry a machine-readable `kind` and, for contract
problems, the offending `key`, so the server can tell the user exactly what to fix.
"""

import importlib
import importlib.util
import json
import os
import sys
import traceback

# scheduler, eval_fn: the probe's (scheduler also check_resume's); state .. load: optional keys check_resume
# reads (resume_runner.py). Every tool ignores the keys it does not read.
CONTRACT_KEYS = (
    "model",
    "batch",
    "batches",
    "loss_fn",
    "optimizer",
    "step_fn",
    "scheduler",
    "eval_fn",
    "setup",
    "wrap_model",
    "state",
    "scaler",
    "ema",
    "next_batch",
    "save",
    "load",
)


class EntrypointError(Exception):
    def __init__(self, kind, message, key=None, tb=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.key = key
        self.tb = tb

    def to_json(self):
        return {"kind": self.kind, "message": self.message, "key": self.key, "traceback": self.tb}


def _tb_tail(limit=3000):
    text = traceback.format_exc()
    return text[-limit:]


def load_function(spec, cwd=None):
    """Import the entrypoint's module and return the function object."""
    cwd = cwd or os.getcwd()
    if ":" not in spec:
        raise EntrypointError(
            "bad_entrypoint",
            f"entrypoint {spec!r} must look like path/to/file.py:function or package.module:function",
        )
    target, _, func_name = spec.rpartition(":")
    if not target or not func_name:
        raise EntrypointError("bad_entrypoint", f"entrypoint {spec!r} names no module or no function")
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = target if os.path.isabs(target) else os.path.join(cwd, target)
        if not os.path.isfile(path):
            raise EntrypointError("entrypoint_not_found", f"entrypoint file {target!r} does not exist")
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        mod_name = "_ts_user_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        if module_spec is None or module_spec.loader is None:
            raise EntrypointError("entrypoint_not_found", f"cannot import {target!r} as a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException as exc:  # the user's module failed at import time
            if isinstance(exc, _TrainingRan):
                raise
            raise EntrypointError(
                "import_error", f"importing {target!r} failed: {type(exc).__name__}: {exc}", tb=_tb_tail()
            ) from None
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name and target.startswith(exc.name):
                raise EntrypointError("entrypoint_not_found", f"module {target!r} was not found") from None
            raise EntrypointError(
                "import_error", f"importing {target!r} failed: {type(exc).__name__}: {exc}", tb=_tb_tail()
            ) from None
        except BaseException as exc:
            if isinstance(exc, _TrainingRan):
                raise
            raise EntrypointError(
                "import_error", f"importing {target!r} failed: {type(exc).__name__}: {exc}", tb=_tb_tail()
            ) from None
    fn = getattr(module, func_name, None)
    if fn is None:
        raise EntrypointError("function_not_found", f"{target!r} defines no function {func_name!r}")
    if not callable(fn):
        raise EntrypointError("function_not_found", f"{target}:{func_name} is not callable")
    return fn


def _is_tensor_tree(obj, torch, depth=0):
    if depth > 6:
        return False
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, dict):
        return len(obj) > 0 and all(
            _is_tensor_tree(v, torch, depth + 1) or not hasattr(v, "shape") for v in obj.values()
        )
    if isinstance(obj, (list, tuple)):
        return len(obj) > 0 and any(_is_tensor_tree(v, torch, depth + 1) for v in obj)
    return False


def validate_contract(result):
    """Check the mapping returned by the entrypoint and normalise it (always a `batches` list)."""
    import torch

    if not isinstance(result, dict):
        try:
            result = dict(result)
        except Exception:
            raise EntrypointError(
                "contract_error",
                f"the entrypoint must return a mapping with at least 'model' and 'batch', got {type(result).__name__}",
            ) from None
    if "model" not in result:
        raise EntrypointError("contract_error", "the returned mapping has no 'model' key", key="model")
    if not isinstance(result["model"], torch.nn.Module):
        raise EntrypointError(
            "contract_error",
            f"'model' must be a torch.nn.Module, got {type(result['model']).__name__}",
            key="model",
        )
    if "batch" in result and "batches" in result:
        raise EntrypointError("contract_error", "give either 'batch' or 'batches', not both", key="batches")
    if "batch" in result:
        batches = [result["batch"]]
        key = "batch"
    elif "batches" in result:
        key = "batches"
        try:
            batches = list(result["batches"])
        except TypeError:
            raise EntrypointError(
                "contract_error", "'batches' must be a list or an iterable of batches", key=key
            ) from None
        if not batches:
            raise EntrypointError("contract_error", "'batches' is empty", key=key)
    else:
        raise EntrypointError(
            "contract_error", "the returned mapping has neither 'batch' nor 'batches'", key="batch"
        )
    for i, b in enumerate(batches):
        if not _is_tensor_tree(b, torch):
            where = key if key == "batch" else f"batches[{i}]"
            raise EntrypointError(
                "contract_error",
                f"{where} must be a tensor, a tuple/list or a dict of tensors, got {type(b).__name__}",
                key=key,
            )
    for name in ("loss_fn", "step_fn", "eval_fn", "setup", "wrap_model"):
        if result.get(name) is not None and not callable(result[name]):
            raise EntrypointError("contract_error", f"'{name}' must be callable", key=name)
    _check_loss_fn(result.get("loss_fn"), torch)
    opt = result.get("optimizer")
    if opt is not None and not isinstance(opt, torch.optim.Optimizer):
        raise EntrypointError(
            "contract_error",
            f"'optimizer' must be a torch.optim.Optimizer, got {type(opt).__name__}",
            key="optimizer",
        )
    sched = result.get("scheduler")
    if sched is not None and not callable(getattr(sched, "step", None)):
        raise EntrypointError(
            "contract_error",
            f"'scheduler' must have a step() method (a torch.optim.lr_scheduler), got {type(sched).__name__}",
            key="scheduler",
        )
    out = dict(result)
    out.pop("batch", None)
    out["batches"] = batches
    out["unknown_keys"] = sorted(k for k in result if k not in CONTRACT_KEYS)
    return out


# First parameter names of a criterion(output, target), which the contract's loss_fn(model, batch) is not.
_OUTPUT_NAMES = {"out", "output", "outputs", "logits", "pred", "preds", "prediction", "predictions", "y_hat",
                 "yhat", "y_pred", "scores", "input"}  # fmt: skip
_LOSS_FN_HINT = (
    "'loss_fn' is called as loss_fn(model, batch): it runs the model on the batch itself and returns the loss "
    "(a scalar, or a dict of terms that are summed). Wrap your criterion, e.g. "
    "'loss_fn': lambda model, batch: criterion(model(batch[0]), batch[1])"
)


def _check_loss_fn(fn, torch):
    """A criterion given where the contract wants loss_fn(model, batch) fails deep inside the run with a
    TypeError that blames the user's code; say what the contract is before anything runs."""
    if fn is None:
        return
    if isinstance(fn, torch.nn.Module):
        raise EntrypointError(
            "contract_error",
            f"'loss_fn' is a {type(fn).__name__} module, a criterion(output, target). " + _LOSS_FN_HINT,
            key="loss_fn",
        )
    import inspect

    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return
    if params and params[0].name.lower() in _OUTPUT_NAMES:
        names = ", ".join(p.name for p in params)
        raise EntrypointError(
            "contract_error",
            f"'loss_fn' takes ({names}), like a criterion(output, target). " + _LOSS_FN_HINT,
            key="loss_fn",
        )


SCRIPT_HELP = (
    "an entrypoint is a function that builds the model and a batch and returns them "
    "({'model': ..., 'batch': ...}); to probe a training script as it is, give the command you run: "
    "`trainsleuth probe -- python SCRIPT ...` (MCP: probe_gradients with command='python SCRIPT ...'), "
    "or scaffold an entrypoint: `trainsleuth probe --scaffold SCRIPT`"
)


class _TrainingRan(BaseException):
    pass


def _no_training(what, counter=None):
    """A global optimizer-step hook: with `counter` (a list) it counts steps, else it stops code that
    trains while it is being imported (a training script)."""
    try:
        from torch.optim.optimizer import register_optimizer_step_pre_hook
    except ImportError:
        return None

    def hook(optimizer, args, kwargs):
        if getattr(sys.modules.get("_ts_script"), "ACTIVE", False):
            return  # a scaffolded entrypoint capturing its script on purpose
        if counter is not None:
            counter.append(1)
            return
        raise _TrainingRan(what)

    return register_optimizer_step_pre_hook(hook)


def load_contract(spec, cwd=None):
    target = spec.rpartition(":")[0]
    guard = _no_training(target)
    try:
        fn = load_function(spec, cwd)
    except _TrainingRan:
        raise EntrypointError(
            "script_entrypoint",
            f"importing {target!r} runs training (it called optimizer.step()): it is a training script, "
            f"not a module with an entrypoint function; {SCRIPT_HELP}",
        ) from None
    except EntrypointError as exc:
        if exc.kind == "import_error" and "SystemExit" in exc.message:
            raise EntrypointError(
                "script_entrypoint",
                f"importing {target!r} exits ({exc.message.split(' failed: ')[-1]}): it parses command-line "
                f"arguments at import time, so it is a script; {SCRIPT_HELP}",
                tb=exc.tb,
            ) from None
        raise
    finally:
        if guard is not None:
            guard.remove()
    steps = []  # type: list  # an entrypoint may train a little to reach a state (a checkpoint's); a script returns nothing
    guard = _no_training(spec, steps)
    try:
        result = fn()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, SystemExit):
            raise EntrypointError(
                "script_entrypoint",
                f"{spec} exited (SystemExit: {exc.code}): it parses command-line arguments, so it is a "
                f"script's main function; {SCRIPT_HELP}",
                tb=_tb_tail(),
            ) from None
        if type(exc).__name__ == "ScaffoldIncomplete":
            raise EntrypointError("scaffold_incomplete", f"{spec}: {exc}", key="loss_fn") from None
        raise EntrypointError(
            "entrypoint_raised", f"{spec} raised {type(exc).__name__}: {exc}", tb=_tb_tail()
        ) from None
    finally:
        if guard is not None:
            guard.remove()
    if result is None:
        trained = f" after {len(steps)} optimizer step(s): it runs a training loop" if steps else ""
        raise EntrypointError(
            "script_entrypoint", f"{spec} returned None{trained}; {SCRIPT_HELP}", key="model"
        )
    return validate_contract(result)


def unexpected_failure(exc):
    """The runner's answer for an error it did not anticipate (call inside the `except` block)."""
    return {
        "ok": False,
        "error": {
            "kind": "runner_failed",
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": _tb_tail(),
        },
    }


def write_result(path, payload):
    """Write the runner's JSON answer atomically (the server reads it after the process exits)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, allow_nan=False, default=_json_default)
    os.replace(tmp, path)


def _json_default(obj):
    try:
        return float(obj)
    except Exception:
        return repr(obj)


def finite_or_none(x):
    """JSON has no NaN/Inf: encode them as strings so nothing is silently lost."""
    try:
        x = float(x)
    except Exception:
        return None
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return x
