"""The observer's distributed plugin: per-rank digests of every tensor the models hold, and dumps on request.

Torch and the standard library only. Each rank of the user's own `torchrun` job writes, into the run's
output folder, one line of JSON per point it digests (`dist-n<node>-r<rank>-p<pid>.jsonl`):

- `meta`: the tensors it tracks, named as the user's code names them (`model.features.w`), with kind
  (parameter, frozen parameter, buffer, attribute), module, shape, dtype and whether DDP covers them;
- `init`: every tensor of an outermost module when that module is first called (after construction,
  loading and wrapping; before its first forward): modules outside DDP (frozen feature extractors,
  random projections, EMA copies, normalisers, teachers) are seen like the wrapped model;
- `grad` k: the gradients each optimizer is about to apply in observed step k;
- `step` k: every tracked tensor at the end of observed step k.

A digest is a few float64 figures of the tensor (sum, sum of squares, max |x|, a position-weighted sum)
and a handful of its elements at fixed positions, so the server can tell which tensor differs across
ranks, from when, and by about how much, without moving the tensors. **The plugin never calls a
collective**: the ranks do not talk to each other here, they write files and the server compares them
(`trainsleuth/tools/distributed/digests.py`), so nothing can pair with the job's own collectives.

For hangs, each rank writes `dist-hello-...json` (its pid) at start and keeps a thread that, when the
server creates `dist-dump.request`, writes the rank's Flight Recorder records (`fr/rank<r>`) and every
thread's stack (`dist-stacks-r<r>.txt`, faulthandler): that works while the main thread waits inside a
collective.
"""

import faulthandler
import json
import math
import os
import sys
import threading
import time
from typing import Any

import _ts_observe as core

SAMPLES = 16
WEIGHTED_MAX = 1 << 20  # elements in the position-weighted sum (an even stride over larger tensors)
MAX_TENSORS = 20000
REQUEST = "dist-dump.request"
WRAPPERS = ("DistributedDataParallel", "DataParallel")
SHARDED = ("FlatParameter", "DTensor")


def make(observer, options):
    return DistPlugin(observer, options)


class Tracked:
    __slots__ = ("attr", "ddp", "kind", "module", "name", "owner", "ref_id", "synced_each_forward")

    def __init__(self, name, kind, module, owner, attr, ddp, synced):
        self.name = name
        self.kind = kind
        self.module = module  # the module path as the user names it
        self.owner = owner  # the nn.Module object holding it (read afresh at each digest)
        self.attr = attr
        self.ddp = ddp
        self.synced_each_forward = synced
        self.ref_id = None

    def tensor(self):
        if self.kind in ("parameter", "frozen parameter"):
            return self.owner._parameters.get(self.attr)
        if self.kind == "buffer":
            return self.owner._buffers.get(self.attr)
        return self.owner.__dict__.get(self.attr)


class DistPlugin:
    def __init__(self, observer, options):
        self.obs = observer
        self.options = options
        self.torch: Any = None
        ident = observer.identity
        self.rank = ident["rank"]
        tag = f"n{ident['node']}-r{ident['rank']}-p{observer.pid}"
        self.path = os.path.join(observer.out_dir, f"dist-{tag}.jsonl")
        self.hello = os.path.join(observer.out_dir, f"dist-hello-{tag}.json")
        self.tracked = []
        self._by_tensor = {}  # id(tensor) -> Tracked (a tensor reachable from two roots is tracked once)
        self._names = set()
        self.roots = []
        self.wrappers = []
        self._wrapped_ids = set()
        self._synced_ids = set()
        self.skipped = {}
        self.points = 0
        self.digest_s = 0.0
        self._weights = {}
        self._dumped = set()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ set-up

    def setup(self):
        self.torch = self.obs.torch
        _write_json(
            self.hello,
            {
                **self.obs.identity,
                "is_rank": "RANK" in os.environ,  # the torchrun agent imports torch too, but is no rank
                "time": time.time(),
                "jsonl": os.path.basename(self.path),
            },
        )
        threading.Thread(target=self._watch_requests, name="trainsleuth-dist-watch", daemon=True).start()

    def _watch_requests(self):
        """A heartbeat of the last finished step (the core marks observed steps only), and, on the server's
        request (a hang), the Flight Recorder records and all stacks: from this thread, which runs while
        the main thread waits inside a collective."""
        request = os.path.join(self.obs.out_dir, REQUEST)
        progress = os.path.join(self.obs.out_dir, f"{core.PROGRESS_PREFIX}{self.obs._tag()}.json")
        marked = 0
        while True:
            try:
                done = self.obs.k - 1
                if done > marked and "RANK" in os.environ:
                    marked = done
                    tmp = f"{progress}.hb{os.getpid()}"
                    with core._open(tmp, "w", encoding="utf-8") as fh:
                        json.dump(
                            {"step": done, "time": time.time(), "pid": os.getpid(), "rank": self.rank}, fh
                        )
                    os.replace(tmp, progress)
                if os.path.exists(request):
                    with core._open(request, encoding="utf-8") as fh:
                        token = fh.read().strip() or "1"
                    if token not in self._dumped:
                        self._dumped.add(token)
                        self.dump(f"requested by the server ({token})")
            except Exception:
                pass
            time.sleep(0.2)

    def dump(self, reason):
        note = {"reason": reason, "time": time.time(), "rank": self.rank, "pid": os.getpid()}
        torch = self.torch
        try:
            dist = torch.distributed if torch is not None else None
            if dist is not None and dist.is_available() and dist.is_initialized():
                data = torch._C._distributed_c10d._dump_fr_trace()
                folder = os.path.join(self.obs.out_dir, "fr")
                os.makedirs(folder, exist_ok=True)
                path = os.path.join(folder, f"rank{self.rank}")
                with core._open(path + ".tmp", "wb") as fh:
                    fh.write(data)
                os.replace(path + ".tmp", path)
            else:
                note["flight_recorder_error"] = "torch.distributed is not initialised in this process"
        except Exception as exc:
            note["flight_recorder_error"] = f"{type(exc).__name__}: {exc}"[:500]
        try:
            with core._open(os.path.join(self.obs.out_dir, f"dist-stacks-r{self.rank}.txt"), "w") as fh:
                faulthandler.dump_traceback(file=fh, all_threads=True)
        except Exception as exc:
            note["stack_error"] = f"{type(exc).__name__}: {exc}"[:500]
        _write_json(os.path.join(self.obs.out_dir, f"dist-dumped-r{self.rank}.json"), note)

    # ------------------------------------------------------------------ what to track

    def root_seen(self, info):
        module = info.module
        name = self._root_name(module, info.label)
        for path, sub in _user_modules(module):
            if type(sub).__name__ in WRAPPERS and isinstance(
                getattr(sub, "module", None), self.torch.nn.Module
            ):
                self._note_wrapper(sub, f"{name}.{path}" if path else name)
        if not self.roots:
            self._write({"point": "job", "k": self.obs.k, "backend": self._backend()})
        new = self._track(module, name)
        self.roots.append(
            {"name": name, "type": type(module).__name__, "step": self.obs.k, "tensors": len(new)}
        )
        if new:
            self._write(
                {"point": "meta", "k": self.obs.k, "tensors": {t.name: self._meta(t, name) for t in new}}
            )
            self._digest("init", self.obs.k, new, root=name)

    def _backend(self):
        try:
            dist = self.torch.distributed
            return str(dist.get_backend()) if dist.is_available() and dist.is_initialized() else None
        except Exception:
            return None

    def _note_wrapper(self, ddp, name):
        if id(ddp) in {w["id"] for w in self.wrappers}:
            return
        inner = ddp.module
        ids = {id(m) for m in inner.modules()}
        self._wrapped_ids |= ids
        broadcast = bool(getattr(ddp, "broadcast_buffers", False))
        if broadcast and type(ddp).__name__ == "DistributedDataParallel":
            self._synced_ids |= ids
        wrapper = {
            "id": id(ddp),
            "module": name,
            "kind": "DDP" if type(ddp).__name__ == "DistributedDataParallel" else type(ddp).__name__,
            "find_unused_parameters": getattr(ddp, "find_unused_parameters", None),
            "static_graph": getattr(ddp, "static_graph", None),
            "broadcast_buffers": broadcast,
        }
        self.wrappers.append(wrapper)
        self._write({"point": "wrapper", "k": self.obs.k, **{k: v for k, v in wrapper.items() if k != "id"}})

    def _root_name(self, module, label):
        """How the user's code names this model: its variable, else an attribute path from one (model.features)."""
        frame: Any = sys._getframe(1)
        while frame is not None and core._is_library(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            return label
        candidates = list(frame.f_locals.items())
        owner = frame.f_locals.get("self")
        if owner is not None:
            candidates += [(f"self.{k}", v) for k, v in getattr(owner, "__dict__", {}).items()]
            candidates += [(f"self.{k}", v) for k, v in (getattr(owner, "_modules", None) or {}).items()]
        nn = self.torch.nn
        for var, value in candidates:
            if value is module and var != "self":
                return var
        for var, value in candidates:
            if not isinstance(value, nn.Module) or value is module:
                continue
            for path, sub in _user_modules(value):
                if sub is module and path:
                    return f"{var}.{path}" if var != "self" else path
        return label

    def _track(self, root, root_name):
        """Register every parameter, buffer and plain tensor attribute below `root` not tracked yet."""
        torch = self.torch
        new = []
        for user_path, mod in _user_modules(root):
            mod_name = f"{root_name}.{user_path}" if user_path else root_name
            in_ddp = id(mod) in self._wrapped_ids
            synced = id(mod) in self._synced_ids
            items = [(k, "parameter", p) for k, p in mod._parameters.items() if p is not None]
            items += [(k, "buffer", b) for k, b in mod._buffers.items() if b is not None]
            if not type(mod).__module__.startswith("torch."):
                items += [
                    (k, "attribute", v)
                    for k, v in vars(mod).items()
                    if isinstance(v, torch.Tensor) and not k.startswith("__") and v.grad_fn is None
                ]
            for attr, kind, t in items:
                if id(t) in self._by_tensor or len(self.tracked) >= MAX_TENSORS:
                    continue
                if kind == "parameter" and not t.requires_grad:
                    kind = "frozen parameter"
                full = f"{mod_name}.{attr}"
                if type(t).__name__ in SHARDED or hasattr(t, "_local_tensor"):
                    self.skipped[full] = f"{type(t).__name__}: each rank holds its own shard"
                    continue
                if full in self._names:
                    continue
                tr = Tracked(full, kind, mod_name, mod, attr, in_ddp, synced and kind == "buffer")
                tr.ref_id = id(t)
                self._by_tensor[id(t)] = tr
                self._names.add(full)
                self.tracked.append(tr)
                new.append(tr)
        return new

    def _meta(self, t, root):
        x = t.tensor()
        return {
            "kind": t.kind,
            "module": t.module,
            "shape": list(x.shape) if x is not None else None,
            "dtype": str(x.dtype).replace("torch.", "") if x is not None else None,
            "root": root,
            "running": t.kind == "buffer" and _is_norm_statistics(t.owner, t.attr),
            "in_ddp": t.ddp,
            "synced_each_forward": t.synced_each_forward,
        }

    # ------------------------------------------------------------------ observed steps

    def before_step(self, info, k):
        opt = info.optimizer
        if opt is None:
            return
        rows = []
        for group in opt.param_groups:
            for p in group["params"]:
                tr = self._by_tensor.get(id(p))
                if tr is not None and p.grad is not None:
                    rows.append((tr.name, p.grad))
        if rows:
            self._digest_tensors("grad", k, rows, optimizer=info.index)

    def end(self, k):
        self._digest("step", k, self.tracked)

    def finish(self, reason):
        return {
            "file": os.path.basename(self.path),
            "roots": self.roots,
            "wrappers": [{k: v for k, v in w.items() if k != "id"} for w in self.wrappers],
            "tensors": len(self.tracked),
            "skipped": dict(list(self.skipped.items())[:50]),
            "points": self.points,
            "digest_s": round(self.digest_s, 4),
        }

    # ------------------------------------------------------------------ digests

    def _digest(self, point, k, tracked, **extra):
        rows = []
        for t in tracked:
            x = t.tensor()
            if x is not None and isinstance(x, self.torch.Tensor):
                rows.append((t.name, x))
        self._digest_tensors(point, k, rows, **extra)

    def _digest_tensors(self, point, k, rows, **extra):
        t0 = time.perf_counter()
        torch = self.torch
        out = {}
        with torch.no_grad():
            for name, x in rows:
                try:
                    out[name] = self._one(x)
                except Exception as exc:  # a tensor we cannot read (meta, sparse, ...): say so, go on
                    out[name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        self.digest_s += time.perf_counter() - t0
        self._write({"point": point, "k": k, "t": out, **extra})

    def _one(self, x):
        torch = self.torch
        x = x.detach()
        if x.is_complex():
            x = torch.view_as_real(x)
        n = x.numel()
        if n == 0:
            return [0]
        flat = x.reshape(-1).to(torch.float64)
        stride = max(1, -(-n // WEIGHTED_MAX))
        part = flat[::stride]
        w = self._weights_for(part.numel(), part.device)
        idx = self._sample_index(n, flat.device)
        head = torch.stack([flat.sum(), (flat * flat).sum(), flat.abs().max(), (part * w).sum()])
        values = torch.cat([head, flat[idx]]).tolist()
        return [n] + [_num(v) for v in values]

    def _weights_for(self, m, device):
        key = (m, str(device))
        w = self._weights.get(key)
        if w is None:
            torch = self.torch
            w = torch.cos(torch.arange(m, dtype=torch.float64, device=device) * 0.7548776662466927)
            if len(self._weights) < 256:
                self._weights[key] = w
        return w

    def _sample_index(self, n, device):
        key = ("idx", n, str(device))
        idx = self._weights.get(key)
        if idx is None:
            torch = self.torch
            count = min(n, SAMPLES)
            idx = torch.tensor([(i * (n - 1)) // max(1, count - 1) for i in range(count)], device=device)
            if len(self._weights) < 256:
                self._weights[key] = idx
        return idx

    def _write(self, record):
        self.points += 1
        with self._lock, core._open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


WRAPPED_CHILD = {
    "DistributedDataParallel": "module",
    "DataParallel": "module",
    "OptimizedModule": "_orig_mod",
    "FullyShardedDataParallel": "_fsdp_wrapped_module",
    "CheckpointWrapper": "_checkpoint_wrapped_module",
}


def _user_modules(root, prefix="", seen=None):
    """(path, module) below `root` with wrappers' own child names left out: `head.module.fc` is `head.fc`."""
    seen = set() if seen is None else seen
    if id(root) in seen:
        return
    seen.add(id(root))
    yield prefix, root
    skip = WRAPPED_CHILD.get(type(root).__name__)
    for name, child in root._modules.items():
        if child is None:
            continue
        path = prefix if name == skip else (f"{prefix}.{name}" if prefix else name)
        yield from _user_modules(child, path, seen)


def _is_norm_statistics(module, attr):
    """BatchNorm / InstanceNorm running statistics: computed from each rank's own batches by design."""
    names = {c.__name__ for c in type(module).__mro__}
    return bool(names & {"_NormBase", "_BatchNorm", "_InstanceNorm"}) and attr in (
        "running_mean",
        "running_var",
        "num_batches_tracked",
    )


def _num(v):
    if v != v:
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _write_json(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with core._open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, default=repr)
    os.replace(tmp, path)
