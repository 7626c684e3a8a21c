"""Shared pieces of the differential tracer (`_ts_observe_trace.py`). Torch and the standard library only."""

from typing import Any

MAX_EVENTS = 40000
MAX_OPS_PER_STEP = 2500
MAX_WRITES_PER_STEP = 400
MAX_ROOT_CALLS_PER_STEP = 8
CLONE_LIMIT = 20_000_000  # parameter elements: below this, updates are measured exactly (a copy is kept)
WRAPPERS = {"DistributedDataParallel", "DataParallel", "OptimizedModule", "FullyShardedDataParallel"}
NAME_WRAPPERS = {
    "module",
    "_orig_mod",
    "_fsdp_wrapped_module",
    "_checkpoint_wrapped_module",
    "_forward_module",
}
VIEW_OPS = {
    "view", "reshape", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "expand",
    "expand_as", "t", "transpose", "permute", "contiguous", "detach", "detach_", "to", "cpu", "cuda",
    "type", "float", "double", "half", "bfloat16", "clone", "__getitem__", "split", "chunk", "unbind",
    "narrow", "select", "as_strided", "requires_grad_", "retain_grad", "numpy", "tolist", "item",
    "__get__", "__set__", "size", "dim", "numel", "stride", "is_contiguous", "data_ptr",
    "untyped_storage", "storage_offset", "element_size", "is_floating_point", "is_complex",
    "__len__", "__iter__", "__bool__", "__repr__", "__format__", "__hash__", "__index__", "__int__",
    "__float__", "__reduce_ex__", "__deepcopy__", "__setstate__", "share_memory_", "pin_memory",
    "_is_view", "is_leaf", "grad_fn", "__contains__", "dtype", "device", "shape", "ndim",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
}  # fmt: skip
_C_MODULES = {"torch._C._nn": "F", "torch._C._VariableFunctions": "torch", "torch._C._linalg": "torch.linalg",
              "torch._C._fft": "torch.fft", "torch._C._special": "torch.special"}  # fmt: skip


def _quiet(method):
    """The tracer's own torch calls (summaries, copies) are not the user's: nothing inside is recorded."""

    def run(self, *args, **kwargs):
        self._busy += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._busy -= 1

    run.__name__ = method.__name__
    run.__doc__ = method.__doc__
    return run


def _norm_name(name):
    parts = [p for p in name.split(".") if p not in NAME_WRAPPERS]
    return ".".join(parts)


def _differs(a, b):
    try:
        return bool(a != b)
    except Exception:
        return a is not b


def _ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


class TracerState:
    """What the parts of the tracer share (set in `Tracer.__init__`), declared once for the type checker."""

    obs: Any
    torch: Any
    seed: int
    pin_seeds: bool
    events: list
    seeds: list
    _busy: int
    _tid: int
    _pid: int
    _in_step: bool
    _stack: list
    _root_calls: int
    _fwd: dict
    _storages: dict
    _qual_cache: dict
    _grad_writers: dict
    _mode: Any
    _ops_off: bool

    def note(self, text: str) -> None:
        raise NotImplementedError

    def _event(self, kind: str, fn: str, site: Any = None, at: Any = None, target: Any = None,
               args: Any = None, out: Any = None, **extra: Any) -> Any:  # fmt: skip
        raise NotImplementedError

    def _count(self, kind: str, limit: int) -> bool:
        raise NotImplementedError

    def _sites(self, outer: int = 0) -> Any:
        raise NotImplementedError

    def _remember(self, tensor: Any) -> None:
        raise NotImplementedError

    def _remove_mode(self, why: Any) -> None:
        raise NotImplementedError
