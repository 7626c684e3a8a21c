"""Which torch APIs the differential tracer wraps, and how a call's arguments are written down.

Torch and the standard library only. A wrapper records the call after it returns (its arguments
bound to the function's signature with the defaults filled in, so `normal_(w, 0, 0.02)` and
`normal_(w, std=0.02)` read the same and a changed default shows), the user's call site, and a
summary of the tensor it wrote or returned. Calls made while another traced call runs (the
`uniform_` inside `kaiming_uniform_`, the children of `model.train()`) are not recorded again.
"""

import enum
import functools
import inspect
import sys

MAX_STR = 80
MAX_ITEMS = 6

# (module path, attribute names): every place the same function object is reachable from.
INIT_FUNCTIONS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
)
UTILS_FUNCTIONS = (
    "spectral_norm",
    "remove_spectral_norm",
    "weight_norm",
    "remove_weight_norm",
    "clip_grad_norm_",
    "clip_grad_norm",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "skip_init",
    "vector_to_parameters",
    "register_parametrization",
    "remove_parametrizations",
    "orthogonal",
)
UTILS_MODULES = (
    "torch.nn.utils",
    "torch.nn.utils.clip_grad",
    "torch.nn.utils.spectral_norm",
    "torch.nn.utils.weight_norm",
    "torch.nn.utils.parametrize",
    "torch.nn.utils.parametrizations",
    "torch.nn.utils.convert_parameters",
)
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "reduce",
    "all_to_all_single",
    "all_to_all",
    "scatter",
    "gather",
    "send",
    "recv",
    "barrier",
)
# The argument that is the call's target (the tensor written, the module changed), by function name.
TARGET_ARG = {
    "register_parametrization": "module",
    "remove_parametrizations": "module",
    "spectral_norm": "module",
    "remove_spectral_norm": "module",
    "weight_norm": "module",
    "remove_weight_norm": "module",
    "orthogonal": "module",
    "skip_init": None,
}


def describe(torch, value, depth=0, values=True):
    """A short JSON-able description of an argument: values as they are, tensors by shape and dtype
    (a one-element tensor by its value when `values`: a learning rate, a clip norm)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, str):
        return value[:MAX_STR]
    if isinstance(value, enum.Enum):
        return str(value.name)
    if isinstance(value, torch.Tensor):
        if values and value.numel() == 1 and not value.requires_grad and value.device.type == "cpu":
            try:
                return {"scalar": float(value)}
            except Exception:
                pass
        return {"tensor": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, torch.nn.Module):
        return {"module": type(value).__name__}
    if depth < 2 and isinstance(value, (list, tuple)):
        items = [describe(torch, v, depth + 1, values) for v in list(value)[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"... {len(value)} items")
        return items
    if depth < 2 and isinstance(value, dict):
        return {
            str(k)[:40]: describe(torch, v, depth + 1, values) for k, v in list(value.items())[:MAX_ITEMS]
        }
    if callable(value):
        return {"callable": getattr(value, "__qualname__", None) or type(value).__name__}
    name = type(value).__name__
    text = getattr(value, "name", None)
    if isinstance(text, str):  # ReduceOp and friends
        return f"{name}.{text}"[:MAX_STR]
    try:
        shown = str(value)
    except Exception:
        shown = name
    return shown[:MAX_STR] if len(shown) < MAX_STR and " object at 0x" not in shown else name


def bind(fn, args, kwargs):
    """The call's arguments by parameter name, defaults included; positional indexes if it has no signature."""
    try:
        sig = _signature(fn)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments), sig
    except (TypeError, ValueError):
        merged = {str(i): a for i, a in enumerate(args)}
        merged.update(kwargs)
        return merged, None


@functools.lru_cache(maxsize=512)
def _signature(fn):
    return inspect.signature(fn)


def patch_everywhere(original, wrapper, module_names):
    """Replace `original` by `wrapper` wherever the named modules expose it (under any name)."""
    done = 0
    for name in module_names:
        module = sys.modules.get(name)
        if module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is original:
                setattr(module, attr, wrapper)
                done += 1
    return done
