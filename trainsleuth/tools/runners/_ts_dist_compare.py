"""Cross-rank comparison for the distributed check (torch + standard library only).

Every rank calls `RankCheck.compare` with the same named tensors in the same order. Values travel
as one flattened float64 vector per comparison (rank 0's broadcast, then one gather of every
rank's per-tensor distance), over the check's own process group, so the check's collectives can
never pair with the user's. Sharded DTensors (FSDP2) are compared as full tensors.

Also here: what the check compares besides the model (state derived outside it, found in the
contract's `state`, in the closures of `loss_fn` / `step_fn` / `wrap_model`, and in attributes the
model holds without registering them) and a description of the wrappers (DDP, FSDP) in use.
"""

import math

import _ts_dist_common as common

MAX_ROWS = 200
CHUNK = 1 << 24  # float64 elements per broadcast (128 MiB)


def dtensor_class():
    try:
        from torch.distributed.tensor import DTensor

        return DTensor
    except Exception:
        try:
            from torch.distributed._tensor import DTensor

            return DTensor
        except Exception:
            return None


def full_value(t):
    """A plain tensor holding the whole value (DTensor shards are gathered: a collective)."""
    cls = dtensor_class()
    if cls is not None and isinstance(t, cls):
        return t.full_tensor()
    return t


def as_float64(torch, t):
    x = full_value(t).detach()
    if x.is_complex():
        x = torch.view_as_real(x)
    return x.to("cpu", torch.float64).reshape(-1)


class RankCheck:
    def __init__(self, dist, torch, rank, world, group, rank_rtol):
        self.dist = dist
        self.torch = torch
        self.rank = rank
        self.world = world
        self.group = group
        self.rank_rtol = rank_rtol

    def gather_object(self, obj):
        out = [None] * self.world
        self.dist.all_gather_object(out, obj, group=self.group)
        return out

    def _broadcast(self, flat):
        torch = self.torch
        ref = flat.clone()
        for start in range(0, max(ref.numel(), 1), CHUNK):
            part = ref[start : start + CHUNK]
            if part.numel():
                buf = part.contiguous()
                self.dist.broadcast(buf, src=0, group=self.group)
                ref[start : start + CHUNK] = buf
        return ref if ref.numel() else torch.zeros(0, dtype=torch.float64)

    def compare(self, named, phase, step, kind, keep=None):
        """Measure every rank's distance to rank 0 for each named tensor.

        Returns (on rank 0) a comparison with one row per tensor that differs beyond rank_rtol, or a
        structure mismatch when ranks disagree on names, shapes or dtypes (values are then not
        exchanged, so that no rank waits for a tensor another never sends). `keep(name, value)` is
        called on rank 0 with its own full float64 values (used to seed the single-process replay)."""
        torch = self.torch
        meta = [(n, tuple(t.shape), str(t.dtype)) for n, t in named]
        metas = self.gather_object(meta)
        base = {"phase": phase, "step": step, "kind": kind, "compared": len(named)}
        if any(m != metas[0] for m in metas):
            bad = next(r for r, m in enumerate(metas) if m != metas[0])
            base.update(
                {"structure_mismatch": {"rank": bad, "detail": first_meta_difference(metas[0], metas[bad])}}
            )
            base["rows"] = []
            return base
        values = [as_float64(torch, t) for _n, t in named]
        sizes = [v.numel() for v in values]
        flat = torch.cat(values) if values else torch.zeros(0, dtype=torch.float64)
        ref = self._broadcast(flat)
        n = len(named)
        diffs = torch.zeros(max(n, 1), dtype=torch.float64)
        scales = torch.zeros(max(n, 1), dtype=torch.float64)
        offset = 0
        for i, size in enumerate(sizes):
            mine = flat[offset : offset + size]
            theirs = ref[offset : offset + size]
            offset += size
            if size:
                max_abs, _rel = common.rel_error(mine, theirs)
                diffs[i] = max_abs
                fin = theirs[torch.isfinite(theirs)]
                scales[i] = float(fin.abs().max()) if fin.numel() else 0.0
            if keep is not None and self.rank == 0:
                keep(named[i][0], mine.reshape(named[i][1].shape))
        gathered = [torch.zeros_like(diffs) for _ in range(self.world)]
        self.dist.all_gather(gathered, diffs, group=self.group)
        rows = []
        if self.rank == 0:
            table = torch.stack(gathered)  # world x n
            for i, (name, t) in enumerate(named):
                scale = float(scales[i])
                per_rank = [float(table[r, i]) for r in range(self.world)]
                rels = [relative(d, scale) for d in per_rank]
                differing = [r for r in range(self.world) if per_rank[r] > 0 and rels[r] > self.rank_rtol]
                if not differing:
                    continue
                worst = max(differing, key=lambda r: per_rank[r])
                rows.append(
                    {
                        "name": name,
                        "rank": worst,
                        "max_abs_diff": common.jsonable(per_rank[worst]),
                        "rel_diff": common.jsonable(rels[worst]),
                        "ref_max_abs": common.jsonable(scale),
                        "frozen": bool(kind == "parameter" and not getattr(t, "requires_grad", True)),
                        "differing_ranks": differing,
                    }
                )
        base["rows"] = rows[:MAX_ROWS]
        base["n_rows"] = len(rows)
        return base

    def equal_to_rank0(self, pairs):
        """For (current, earlier) tensor pairs: does every rank's current value equal rank 0's
        earlier one? (Did the wrapper broadcast rank 0's state?) Returns per pair a list of bools by rank."""
        torch = self.torch
        flags = []
        for now, before in pairs:
            ref = as_float64(torch, before).clone()
            self.dist.broadcast(ref, src=0, group=self.group)
            cur = as_float64(torch, now)
            flags.append(bool(cur.shape == ref.shape and torch.equal(cur, ref)))
        return self.gather_object(flags)


def relative(max_abs, scale):
    if max_abs == 0:
        return 0.0
    if scale > 0 and math.isfinite(max_abs):
        return max_abs / scale
    return math.inf


def first_meta_difference(a, b):
    names_a = [m[0] for m in a]
    names_b = [m[0] for m in b]
    if names_a != names_b:
        only_a = [x for x in names_a if x not in set(names_b)]
        only_b = [x for x in names_b if x not in set(names_a)]
        return {"names_only_on_rank0": only_a[:20], "names_only_on_other": only_b[:20]}
    for ma, mb in zip(a, b, strict=True):
        if ma != mb:
            return {"name": ma[0], "rank0": [list(ma[1]), ma[2]], "other": [list(mb[1]), mb[2]]}
    return {}


# ---------------------------------------------------------------------------- what is compared


def named_params(module):
    return [(common.strip_wrappers(n), p) for n, p in module.named_parameters()]


def named_buffers(module):
    return [(common.strip_wrappers(n), b) for n, b in module.named_buffers()]


def _tensor_leaves(obj, prefix, out, torch, depth=0):
    if isinstance(obj, torch.Tensor):
        out.append((prefix, obj))
    elif depth < 4 and isinstance(obj, dict):
        for k, v in obj.items():
            _tensor_leaves(v, f"{prefix}.{k}" if prefix else str(k), out, torch, depth + 1)
    elif depth < 4 and isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _tensor_leaves(v, f"{prefix}[{i}]", out, torch, depth + 1)


def batch_tensors(batches, torch, limit=8):
    """The entrypoint's global batches (before sharding): every rank must have built the same."""
    out: list = []
    for i, b in enumerate(batches[:limit]):
        _tensor_leaves(b, f"batches[{i}]", out, torch)
    return out


def _function_refs(fn):
    """(name, object) pairs a function can reach: closure cells, defaults, and globals it names."""
    refs: list = []
    code = getattr(fn, "__code__", None)
    if code is None:  # a bound method, or an object with __call__
        fn = getattr(fn, "__func__", None) or (type(fn).__call__ if callable(fn) else None)
        code = getattr(fn, "__code__", None)
        if code is None:
            return refs
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            refs.append((name, cell.cell_contents))
        except ValueError:
            continue
    for i, value in enumerate(getattr(fn, "__defaults__", None) or ()):
        refs.append((f"default{i}", value))
    globs = getattr(fn, "__globals__", {}) or {}
    for name in code.co_names:
        if name in globs:
            refs.append((name, globs[name]))
    return refs


def discover_outside(contract, model, torch):
    """State the model needs but does not own: [(label, tensor, requires_grad)].

    Sources: the contract's `state` (explicit), modules and tensors reachable from `loss_fn`,
    `step_fn` and `wrap_model` (closures, defaults, globals, one call deep), and modules or tensors
    the model keeps as plain attributes (in lists, dicts or via object.__setattr__), which
    DDP never sees."""
    own = {id(t) for t in model.parameters()} | {id(b) for b in model.buffers()}
    own_modules = {id(m) for m in model.modules()}
    found = []
    seen = set()

    def add(label, obj, depth=0):
        if id(obj) in seen or depth > 3:
            return
        if isinstance(obj, torch.nn.Module):
            if id(obj) in own_modules:
                return
            seen.add(id(obj))
            inner = common.unwrap_module(obj)
            for n, p in inner.named_parameters():
                if id(p) not in own:
                    found.append((f"{label}.{common.strip_wrappers(n)}", p, p.requires_grad))
            for n, b in inner.named_buffers():
                if id(b) not in own:
                    found.append((f"{label}.{common.strip_wrappers(n)}", b, False))
        elif isinstance(obj, torch.Tensor):
            if id(obj) in own:
                return
            seen.add(id(obj))
            found.append((label, obj, obj.requires_grad))
        elif isinstance(obj, dict):
            seen.add(id(obj))
            for k, v in list(obj.items())[:64]:
                add(f"{label}.{k}", v, depth + 1)
        elif isinstance(obj, (list, tuple)):
            seen.add(id(obj))
            for i, v in enumerate(list(obj)[:64]):
                add(f"{label}[{i}]", v, depth + 1)

    state = contract.get("state")
    if state is not None:
        add("state", state)
    visited_fns = set()

    def visit_fn(fn, depth):
        if fn is None or id(fn) in visited_fns or depth > 1:
            return
        visited_fns.add(id(fn))
        for name, obj in _function_refs(fn):
            if obj is model:
                continue
            if callable(obj) and not isinstance(obj, (torch.nn.Module, type)) and hasattr(obj, "__code__"):
                visit_fn(obj, depth + 1)
            else:
                add(name, obj)

    for key in ("loss_fn", "step_fn", "wrap_model"):
        visit_fn(contract.get(key), 0)
    for mod_name, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr.startswith("_") or attr in ("training",):
                continue
            label = f"{mod_name}.{attr}" if mod_name else attr
            if isinstance(value, (torch.nn.Module, torch.Tensor, list, tuple, dict)):
                add(label, value)
    return found


# ---------------------------------------------------------------------------- wrappers


def is_ddp(m):
    return type(m).__name__ == "DistributedDataParallel"


def is_fsdp2(m):
    try:
        from torch.distributed.fsdp import FSDPModule

        return isinstance(m, FSDPModule)
    except Exception:
        return False


def is_fsdp1(m):
    return type(m).__name__ == "FullyShardedDataParallel"


def describe_wrappers(wrapped, model):
    """Every DDP / FSDP instance around or inside the model, with its settings."""
    out = []
    seen = set()
    for root_label, root in (("", wrapped), ("", model)):
        for name, m in root.named_modules():
            if id(m) in seen:
                continue
            seen.add(id(m))
            label = common.strip_wrappers(name + ".").rstrip(".") if name else root_label
            if is_ddp(m):
                at_init = getattr(m, "_ts_grad_params_at_init", None)
                frozen_after = []
                if at_init is not None:
                    names = {id(p): common.strip_wrappers(n) for n, p in m.module.named_parameters()}
                    frozen_after = sorted(names[i] for i in at_init if i in names and not _req(m, i))
                out.append(
                    {
                        "kind": "DDP",
                        "module": label or "<model>",
                        "find_unused_parameters": bool(getattr(m, "find_unused_parameters", False)),
                        "static_graph": bool(getattr(m, "static_graph", False)),
                        "broadcast_buffers": bool(getattr(m, "broadcast_buffers", True)),
                        "frozen_after_wrapping": frozen_after[:50],
                    }
                )
            elif is_fsdp2(m):
                out.append({"kind": "FSDP2", "module": label or "<model>"})
            elif is_fsdp1(m):
                out.append({"kind": "FSDP", "module": label or "<model>"})
    return out


def _req(ddp, pid):
    for p in ddp.module.parameters():
        if id(p) == pid:
            return p.requires_grad
    return False


def install_ddp_recorders(torch):
    """Record, per DDP instance, which parameters required grad at construction and how many
    forward passes ran with gradient sync on and off (inside no_sync()). Only this process is
    affected: the worker runs the user's code and nothing else."""
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
    except Exception:
        return
    if getattr(DDP, "_ts_recorded", False):
        return
    init = DDP.__init__
    forward = DDP.forward

    def recording_init(self, module, *args, **kwargs):
        grad_ids = [id(p) for p in module.parameters() if p.requires_grad]
        init(self, module, *args, **kwargs)
        self._ts_grad_params_at_init = grad_ids
        self._ts_forwards = [0, 0]  # with sync, inside no_sync

    def recording_forward(self, *args, **kwargs):
        counts = getattr(self, "_ts_forwards", None)
        if counts is not None and torch.is_grad_enabled():
            counts[0 if self.require_backward_grad_sync else 1] += 1
        return forward(self, *args, **kwargs)

    DDP.__init__ = recording_init  # type: ignore[method-assign]
    DDP.forward = recording_forward  # type: ignore[method-assign]
    DDP._ts_recorded = True  # type: ignore[attr-defined]


def ddp_forward_counts(wrapped, model):
    """[(module label, forwards with sync, forwards inside no_sync)] since the last call (reset)."""
    out = []
    seen = set()
    for root in (wrapped, model):
        for name, m in root.named_modules():
            if id(m) in seen or not is_ddp(m):
                continue
            seen.add(id(m))
            counts = getattr(m, "_ts_forwards", None)
            if counts is None:
                continue
            out.append((common.strip_wrappers(name + ".").rstrip(".") or "<model>", counts[0], counts[1]))
            counts[0] = counts[1] = 0
    return out
