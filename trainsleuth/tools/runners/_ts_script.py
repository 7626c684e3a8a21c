"""Capture a probe contract from a training script: run it until its first optimizer step.

Used by scaffolded entrypoints (`trainsleuth probe --scaffold train.py`). The script runs as
`__main__` with the given arguments, in the user's interpreter; while it runs, the outermost
module call with gradients enabled (the model and its inputs), every loss computed from the model's
output (a criterion, a `torch.nn.functional` loss, or a function of the script's own code such as a
hand-written Huber loss), and the tensor `backward()` is called on are recorded. At the first `optimizer.step()` the
script is stopped before the step is taken, and the probe gets the model, the optimizer, its LR
scheduler, the batch the model last saw, and a `loss_fn` that recomputes the script's loss from it.
When the loss cannot be recomputed (it is built from the output with code the capture cannot
replay), `ScaffoldIncomplete` names the line of the script that called `backward()`: that is the
one thing the scaffold asks the user to write. Torch and the standard library only.
"""

import gc
import linecache
import os
import runpy
import sys
import types
from types import FrameType  # noqa: F401  (type comment)

import torch
from torch.overrides import TorchFunctionMode

ACTIVE = False  # True while a capture runs (the entrypoint loader's training guard stands aside)

LOSS_NAMES = {
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
}


def _register_step_pre_hook(hook):
    """A global optimizer-step pre-hook (every optimizer, including ones wrapped by accelerate)."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    return register_optimizer_step_pre_hook(hook)


class ScaffoldIncomplete(Exception):
    """The script's loss could not be inferred; the message says where to write it."""


class _Captured(BaseException):
    """Raised from the first optimizer step to stop the script (BaseException: user code's
    `except Exception` does not swallow it)."""


def _tensor(x):
    return isinstance(x, torch.Tensor)


class _State:
    def __init__(self, script):
        self.script = os.path.abspath(script)
        self.depth = 0
        self.root = None  # (module, args, kwargs, output)
        self.losses = []  # (callable, args, kwargs, result) computed from the root output
        self.backward = None  # (tensor, filename, lineno)
        self.optimizer = None
        self.targets = []
        self.scheduler = None
        self.folder = os.path.dirname(self.script) + os.sep
        self.pending = {}  # frame -> (code, positional values, keyword values) of a user function
        self.user_code = {}  # code object -> whether it is the script's own plain function


_ARBITRARY_ARGS = 0x04 | 0x08  # CO_VARARGS | CO_VARKEYWORDS


def _own_function(state, code):
    """True for a plain function of the script's own folder (not an installed package, not ours)."""
    known = state.user_code.get(code)
    if known is None:
        name = os.path.abspath(code.co_filename)
        known = (
            name.startswith(state.folder)
            and "site-packages" not in name
            and not os.path.basename(name).startswith("_ts_")
            and not code.co_flags & _ARBITRARY_ARGS
            and not name.endswith("__main__")
        )
        state.user_code[code] = known
    return known


def _profiler(state):
    """sys.setprofile hook: records calls of the script's own functions that receive the model's output
    and return a tensor (a hand-written loss), so the scaffold can replay them."""

    def hook(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if state.root is None or not _own_function(state, code):
                return
            output = state.root[3]
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            values = [frame.f_locals.get(n) for n in names]
            if any(_tensor(v) and _select(output, v) is not None for v in values):
                positional = values[: code.co_argcount]
                keywords = dict(zip(names[code.co_argcount :], values[code.co_argcount :], strict=True))
                state.pending[frame] = (code, positional, keywords)
        elif event == "return" and frame in state.pending:
            code, positional, keywords = state.pending.pop(frame)
            if _tensor(arg):
                state.losses.append((_UserFunction(code), tuple(positional), keywords, arg))

    return hook


class _UserFunction:
    """A function of the script, called again by the replayed loss (found from its code object)."""

    def __init__(self, code):
        self.code = code
        self.__name__ = code.co_name
        self._fn = None

    def __call__(self, *args, **kwargs):
        if self._fn is None:
            found = [f for f in gc.get_referrers(self.code) if isinstance(f, types.FunctionType)]
            if len(found) != 1:
                raise RuntimeError(f"cannot call {self.code.co_name} of the script again")
            self._fn = found[0]
        return self._fn(*args, **kwargs)


def _select(output, target):
    """How `target` is reached from the model's output: None, or a path of attribute/index steps."""
    if target is output:
        return ()
    for name in ("logits", "loss", "last_hidden_state"):
        if getattr(output, name, None) is target:
            return (("attr", name),)
    if isinstance(output, (tuple, list)):
        for i, v in enumerate(output):
            if v is target:
                return (("item", i),)
    if isinstance(output, dict):
        for k, v in output.items():
            if v is target:
                return (("item", k),)
    return None


def _follow(output, path):
    for kind, key in path:
        output = getattr(output, key) if kind == "attr" else output[key]
    return output


class _LossMode(TorchFunctionMode):
    def __init__(self, state):
        super().__init__()
        self.state = state

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if getattr(func, "__name__", "") in LOSS_NAMES and self.state.root is not None:
            self.state.losses.append((func, args, kwargs, out))
        return out


def capture(script, argv=(), cwd=None, loss_fn=None):
    """Run `script` until its first optimizer step; return the probe contract mapping.

    `loss_fn(model, batch)`, when given, replaces the inferred loss."""
    state = _State(script)
    orig_call = torch.nn.Module.__call__
    orig_backward = torch.Tensor.backward

    def module_call(self, *args, **kwargs):
        top = state.depth == 0 and torch.is_grad_enabled()
        state.depth += 1
        try:
            out = orig_call(self, *args, **kwargs)
        finally:
            state.depth -= 1
        if top:
            if any(p.requires_grad for p in self.parameters()):
                state.root = (self, args, kwargs, out)
                state.losses = []
                state.pending.clear()
                if sys.getprofile() is not profiler:
                    sys.setprofile(profiler)
            elif state.root is not None:
                state.losses.append((self, args, kwargs, out))
        return out

    def backward(self, *args, **kwargs):
        if state.backward is None or state.optimizer is None:
            frame = sys._getframe(1)  # type: FrameType | None
            while frame is not None and os.path.abspath(frame.f_code.co_filename) != state.script:
                frame = frame.f_back
            where = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
            state.backward = (self, *where)
        return orig_backward(self, *args, **kwargs)

    def step_pre(optimizer, args, kwargs):
        state.optimizer = optimizer
        state.scheduler = _scheduler(optimizer)  # while the script's frames (and its trainer) are alive
        raise _Captured

    global ACTIVE
    profiler = _profiler(state)
    old_profile = sys.getprofile()
    handle = _register_step_pre_hook(step_pre)
    ACTIVE = True
    old_argv, old_path, old_cwd = list(sys.argv), list(sys.path), os.getcwd()
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(state.script))
    if cwd:
        os.chdir(cwd)
    torch.nn.Module.__call__ = module_call  # type: ignore[method-assign]
    torch.Tensor.backward = backward  # type: ignore[method-assign]
    mode = _LossMode(state)
    finished = False
    try:
        with mode:
            runpy.run_path(state.script, run_name="__main__")
        finished = True
    except _Captured:
        pass
    except SystemExit as exc:
        code = exc.code
        if code not in (0, None):
            raise RuntimeError(
                f"the script exited with code {code} before its first optimizer step (an argument error? "
                "pass the script's arguments: script_args / after `--` on the command line)"
            ) from None
        finished = True
    finally:
        sys.setprofile(old_profile)
        ACTIVE = False
        handle.remove()
        torch.nn.Module.__call__ = orig_call  # type: ignore[method-assign]
        torch.Tensor.backward = orig_backward  # type: ignore[method-assign]
        sys.argv = old_argv
        sys.path[:] = old_path
        os.chdir(old_cwd)
    if finished or state.optimizer is None:
        raise RuntimeError("the script finished without calling optimizer.step(): nothing to probe")
    return _contract(state, loss_fn)


def _contract(state, user_loss=None):
    model, args, kwargs, output = state.root if state.root is not None else (None, (), {}, None)
    if model is None:
        raise RuntimeError(
            "no module with trainable parameters ran with gradients before the first optimizer step"
        )
    model = getattr(model, "_orig_mod", model)  # torch.compile wrapper
    model = (
        getattr(model, "module", model)
        if type(model).__name__ in ("DistributedDataParallel", "DataParallel")
        else model
    )
    args = list(args)
    kwargs = dict(kwargs)
    batch = {"args": args, "kwargs": kwargs}
    loss_t = state.backward[0] if state.backward else None
    loss_fn = user_loss or _infer_loss(state, output, loss_t)
    if loss_fn is None:
        raise ScaffoldIncomplete(_ask_for_loss(state))
    if state.targets:
        batch["targets"] = state.targets
    contract = {"model": model, "batch": batch, "optimizer": state.optimizer, "loss_fn": loss_fn}
    sched = state.scheduler
    if sched is not None:
        contract["scheduler"] = sched
    return contract


def _call(model, batch):
    return model(*batch["args"], **batch["kwargs"])


def _own_losses(output):
    """(path, tensor) for the scalar losses a model output carries: .loss, ['loss'], tuple items."""
    found = []  # type: list
    if _tensor(getattr(output, "loss", None)):
        found.append(((("attr", "loss"),), output.loss))
    if isinstance(output, dict) and _tensor(output.get("loss")):
        found.append(((("item", "loss"),), output["loss"]))
    if isinstance(output, (tuple, list)):
        for i, v in enumerate(output):
            if _tensor(v) and v.numel() == 1 and v.requires_grad:
                found.append(((("item", i),), v))
    if _tensor(output) and output.numel() == 1:
        found.append(((), output))
    return found


def _infer_loss(state, output, loss_t):
    if loss_t is None:
        return None
    # the model computes its own loss (HF models given labels, nanoGPT's `logits, loss = model(x, y)`)
    for path, own in _own_losses(output):
        if own is loss_t:
            return lambda m, b, path=path: _follow(_call(m, b), path)
        if _derived(loss_t, own):
            return lambda m, b, path=path, own=own: _scale(loss_t, own, _follow(_call(m, b), path))
    # a loss function called on the model's output (a criterion module, torch.nn.functional, or a
    # function of the script's own code)
    for fn, args, kwargs, result in reversed(state.losses):
        if not _tensor(result) or not (result is loss_t or _derived(loss_t, result)):
            continue
        slots = []
        for a in args:
            path = _select(output, a) if _tensor(a) else None
            if path is not None:
                slots.append(("out", path))
            elif _tensor(a):  # a target: carried in the batch so the probe sees where it came from
                state.targets.append(a.detach())
                slots.append(("target", len(state.targets) - 1))
            else:
                slots.append(("const", a))
        if not any(kind == "out" for kind, _ in slots):
            continue
        kw = dict(kwargs)

        def loss_fn(m, b, fn=fn, slots=slots, kw=kw, result=result):
            out = _call(m, b)
            values = []
            for kind, v in slots:
                if kind == "out":
                    values.append(_follow(out, v))
                elif kind == "target":
                    values.append(b["targets"][v])
                else:
                    values.append(v)
            return _scale(loss_t, result, fn(*values, **kw))

        return loss_fn
    return None


def _derived(loss_t, base):
    """True when backward ran on `base` times a constant (loss / accumulation_steps, scaler.scale(loss))."""
    node = getattr(loss_t, "grad_fn", None)
    for _ in range(3):
        if node is None:
            return False
        nxt = [n for n, _ in getattr(node, "next_functions", ()) if n is not None]
        if base.grad_fn in nxt:
            return True
        node = nxt[0] if len(nxt) == 1 else None
    return False


def _scale(loss_t, base, value):
    """Apply the script's constant factor (e.g. 1/accumulation_steps) to a recomputed loss."""
    try:
        factor = float(loss_t.detach()) / float(base.detach())
    except (ZeroDivisionError, ValueError):
        return value
    return value * factor if abs(factor - 1.0) > 1e-6 else value


def _scheduler(optimizer):
    """The LR scheduler driving `optimizer` (directly, or through a wrapper such as accelerate's)."""
    from torch.optim.lr_scheduler import LRScheduler

    for obj in gc.get_objects():
        if LRScheduler in type(obj).__mro__:
            opt = getattr(obj, "optimizer", None)
            if opt is optimizer or getattr(opt, "optimizer", None) is optimizer:
                return obj
    return None


def _ask_for_loss(state):
    lines = ""
    where = "the script"
    if state.backward and state.backward[1]:
        filename, lineno = state.backward[1], state.backward[2]
        where = f"{os.path.basename(filename)}:{lineno}"
        lines = "".join(
            f"    {i:5d}  {linecache.getline(filename, i)}" for i in range(max(1, lineno - 8), lineno + 1)
        )
    return (
        f"the loss the script backpropagates ({where}) is computed from the model's output with code the "
        "capture cannot replay; write loss_fn(model, batch) in the scaffold (batch['args'] and "
        "batch['kwargs'] are the model's inputs) from these lines:\n" + lines
    )
