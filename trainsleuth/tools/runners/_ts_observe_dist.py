"""Distributed plugin of the observer: what each rank holds, for the server to compare across ranks.

Torch and the standard library only. On every process of the user's command (every rank of
`torchrun`, `accelerate launch`, a multi-node launch), this plugin writes `dist-<tag>.jsonl` into the
run's output folder: a first line naming the process (rank, node, pid), then one snapshot per
point in time:

- `first_use`: when an outermost module is called for the first time (the state right after
  initialisation and wrapping, before its first forward), and
- `after_step`: at the end of each observed iteration (after every optimizer stepped),

each listing a digest of every parameter, buffer and plain tensor attribute of every module that ran
(DDP's inner modules, modules called outside DDP or under no_grad, and modules the training loop
holds but never called, such as an EMA copy). A digest is a few float64 reductions (sum, L1, L2,
max |x|) and up to 64 evenly spaced elements, so equal tensors give equal digests on every rank and
the server can say by how much two differ.

The plugin never calls a collective: the ranks' digests meet in files, so the observer cannot pair
with, reorder or block the job's own collectives (a model that all-reduces in forward included).
When the server finds the job hung it writes `dump.request`; a watcher thread in every rank then
writes the Flight Recorder's records (`fr/rank<r>`) and every thread's stack (`rank<r>.stacks`).
"""

import faulthandler
import json
import multiprocessing
import os
import sys
import threading
import time
import weakref
from typing import Any

import _ts_dist_common as common
import _ts_observe

SAMPLES = 64
MAX_TENSORS = 20_000  # per snapshot
MAX_ATTRS = 64  # plain attributes looked at per object
ATTR_DEPTH = 2  # module -> object -> object
FLOAT64_LIMIT = 1 << 24  # larger tensors are reduced in float32 (no float64 copy of a huge tensor)
REQUEST = "dump.request"
WATCH_S = 0.25
_MODULE_KEYS: set = set()  # the attribute names every nn.Module has (not the user's state)


def make(observer, options):
    return DistPlugin(observer, options)


class DistPlugin:
    def __init__(self, observer, options):
        self.obs = observer
        self.options = options
        self.torch: Any = None
        ident = observer.identity
        self.rank = ident["rank"]
        self.tag = f"n{ident['node']}-r{ident['rank']}-p{ident['pid']}"
        self.path = os.path.join(observer.out_dir, f"dist-{self.tag}.jsonl")
        self.roots = []  # [label, module, how] in the order they were first seen
        self._root_ids = set()
        self._not_held = set()
        self.ddp = []  # DDP wrappers seen, with their settings
        self.snapshots = 0
        self.tensors_last = 0
        self._attr_refs = {}  # attribute name -> weak reference to the tensor it held last time
        self._samples = {}
        self._lock = threading.Lock()
        self._requested = False

    # ------------------------------------------------------------------ observer events

    def setup(self):
        torch = self.torch = self.obs.torch
        _MODULE_KEYS.update(vars(torch.nn.Module()).keys())
        ident = self.obs.identity
        first = {
            "type": "process",
            "rank": ident["rank"],
            "local_rank": ident["local_rank"],
            "world_size": ident["world_size"],
            "node": ident["node"],
            "hostname": ident["hostname"],
            "pid": ident["pid"],
            "rank_env": "RANK" in os.environ,
            "child": multiprocessing.parent_process() is not None,
            "argv": ident["argv"][:8],
            "time": time.time(),
        }
        self._write(first, mode="w")
        if first["rank_env"] and not first["child"]:
            faulthandler.enable(file=sys.stderr, all_threads=True)
            threading.Thread(target=self._watch, name="trainsleuth-dist-watch", daemon=True).start()

    def root_seen(self, info):
        before = len(self.roots)
        self._add_root(info.label, info.module, "called")
        self._find_held()  # what the loop holds beside it, as it is before this first forward
        new = [r for r in self.roots[before:] if r[1] is not info.module]
        root = next(r for r in self.roots if r[1] is info.module)
        self._snapshot("first_use", self.obs.k, [root, *new])

    def end(self, k):
        self._find_held()
        self._snapshot("after_step", k, self.roots)

    def finish(self, reason):
        return {
            "file": os.path.basename(self.path),
            "snapshots": self.snapshots,
            "tensors": self.tensors_last,
            "roots": [[label, how] for label, _m, how in self.roots],
            "ddp": self.ddp,
        }

    # ------------------------------------------------------------------ what to digest

    def _add_root(self, label, module, how):
        if id(module) in self._root_ids:
            return
        self._root_ids.add(id(module))
        self.roots.append([label, module, how])
        if type(module).__name__ == "DistributedDataParallel":
            self.ddp.append(
                {
                    "kind": "DDP",
                    "module": label,
                    "broadcast_buffers": bool(getattr(module, "broadcast_buffers", True)),
                    "find_unused_parameters": bool(getattr(module, "find_unused_parameters", False)),
                    "static_graph": bool(getattr(module, "static_graph", False)),
                }
            )

    def _find_held(self):
        """Modules the training loop holds but never called (an EMA copy updated in place, a teacher)."""
        nn_module = self.torch.nn.Module
        frame: Any = sys._getframe(1)
        depth = 0
        while frame is not None and depth < 40:
            depth += 1
            if not _ts_observe._is_library(frame.f_code.co_filename):
                for name, value in list(frame.f_locals.items()):
                    if isinstance(value, nn_module):
                        self._held(name if name != "self" else type(value).__name__, value)
                    elif name == "self":
                        for attr, sub in list(getattr(value, "__dict__", {}).items())[:MAX_ATTRS]:
                            if isinstance(sub, nn_module):
                                self._held(attr, sub)
            frame = frame.f_back

    def _held(self, label, module):
        if id(module) in self._root_ids or id(module) in self._not_held:
            return
        covered = {id(t) for _l, m, _h in self.roots for t in _state(m)}
        if all(id(t) in covered for t in _state(module)):
            self._not_held.add(
                id(module)
            )  # nothing of its own: a part of (or a stateless) module seen already
            return
        taken = {r[0] for r in self.roots}
        name, i = label, 2
        while name in taken:
            name, i = f"{label}#{i}", i + 1
        self._add_root(name, module, "held")

    def _collect(self, roots):
        """(name, tensor, kind, flags) for every tensor of `roots`, each tensor once (the first name wins)."""
        torch = self.torch
        seen = set()
        out = []
        ddp_inner = {}
        for label, module, _how in self.roots:
            if type(module).__name__ == "DistributedDataParallel":
                for t in list(module.parameters()) + list(module.buffers()):
                    ddp_inner[id(t)] = (label, bool(getattr(module, "broadcast_buffers", True)))
        for label, module, _how in roots:
            inner = common.unwrap_module(module)
            for name, p in inner.named_parameters(remove_duplicate=True):
                if id(p) in seen:
                    continue
                seen.add(id(p))
                kind = "parameter" if p.requires_grad else "frozen parameter"
                out.append((_join(label, name), p, kind, self._flags(p, ddp_inner, kind)))
            for name, b in inner.named_buffers(remove_duplicate=True):
                if id(b) in seen or b is None:
                    continue
                seen.add(id(b))
                out.append((_join(label, name), b, "buffer", self._flags(b, ddp_inner, "buffer")))
            for mod_name, sub in inner.named_modules(remove_duplicate=True):
                prefix = _join(label, mod_name) if mod_name else label
                self._attributes(prefix, sub, out, seen, torch, 0)
            if len(out) > MAX_TENSORS:
                break
        return out[:MAX_TENSORS]

    def _attributes(self, prefix, obj, out, seen, torch, depth):
        """Tensors held as plain attributes (a normaliser's mean, a tokenizer's table), not params/buffers."""
        items = list(getattr(obj, "__dict__", {}).items())
        count = 0
        for attr, value in items:
            if isinstance(obj, torch.nn.Module) and attr in _MODULE_KEYS:
                continue
            count += 1
            if count > MAX_ATTRS:
                break
            for name, t in _tensor_leaves(f"{prefix}.{attr}", value, torch):
                if id(t) in seen or isinstance(t, torch.nn.Parameter):
                    continue
                seen.add(id(t))
                out.append((name, t, "attribute", self._attr_flags(name, t)))
            if (
                depth + 1 < ATTR_DEPTH
                and not isinstance(value, (torch.Tensor, torch.nn.Module, type, str, bytes, int, float))
                and hasattr(value, "__dict__")
                and not callable(value)
                and not type(value).__module__.startswith(("torch", "builtins"))
            ):
                self._attributes(f"{prefix}.{attr}", value, out, seen, torch, depth + 1)

    def _flags(self, t, ddp_inner, kind):
        flags = {}
        owner = ddp_inner.get(id(t))
        if owner is not None:
            flags["ddp"] = owner[0]
            if kind == "buffer" and owner[1]:
                flags["rebroadcast"] = True  # DDP copies rank 0's buffers into every rank at each forward
        if _sharded(t):
            flags["sharded"] = True
        return flags

    def _attr_flags(self, name, t):
        flags = {}
        previous = self._attr_refs.get(name)
        if previous is not None and previous() is not t:
            flags["replaced"] = True  # a new tensor since the last snapshot: set in forward (a cache)
        try:
            self._attr_refs[name] = weakref.ref(t)
        except TypeError:
            pass
        if t.grad_fn is not None:
            flags["activation"] = True
        if _sharded(t):
            flags["sharded"] = True
        return flags

    # ------------------------------------------------------------------ digests

    def _snapshot(self, phase, step, roots):
        torch = self.torch
        t0 = time.time()
        entries = self._collect(roots)
        rows = []
        with torch.no_grad(), _no_autocast(torch):
            values = [self._digest(t) for _n, t, _k, _f in entries]
        for i, (name, t, kind, flags) in enumerate(entries):
            vals = values[i]
            row = {
                "n": name,
                "k": kind,
                "s": list(getattr(t, "shape", ())),
                "d": str(t.dtype).replace("torch.", ""),
            }
            if vals is None:
                row["skip"] = True
            else:
                row["v"] = vals
            if flags:
                row["f"] = flags
            rows.append(row)
        self.snapshots += 1
        self.tensors_last = len(rows)
        record = {
            "type": "snapshot",
            "phase": phase,
            "step": step,
            "roots": [r[0] for r in roots],
            "tensors": rows,
            "backend": self._backend(),
            "time": time.time(),
            "cost_s": round(time.time() - t0, 6),
        }
        if phase == "after_step":
            record["ddp"] = self.ddp
            record["held"] = [r[0] for r in self.roots if r[2] == "held"]
        self._write(record)

    def _digest(self, t):
        """[sum, L1, L2, max |x|, samples...] in float64, or None for what cannot be read here."""
        torch = self.torch
        try:
            x = t.detach()
            local = getattr(x, "_local_tensor", None)
            if local is not None:
                x = local
            if x.is_sparse or x.device.type == "meta" or x.is_quantized:
                return None
            if x.is_complex():
                x = torch.view_as_real(x)
            flat = x.reshape(-1)
            n = flat.numel()
            if n == 0:
                return [0.0, 0.0, 0.0, 0.0]
            acc = torch.float64 if n <= FLOAT64_LIMIT and flat.device.type != "mps" else torch.float32
            if not flat.is_floating_point():
                flat = flat.to(acc)
            stats = torch.stack(
                [
                    torch.sum(flat, dtype=acc),
                    torch.linalg.vector_norm(flat, 1, dtype=acc),
                    torch.linalg.vector_norm(flat, 2, dtype=acc),
                    torch.linalg.vector_norm(flat, float("inf"), dtype=acc),
                ]
            )
            idx = self._sample_index(n, flat.device)
            picked = flat if idx is None else flat[idx]
            both = torch.cat([stats.to(torch.float64), picked.to(torch.float64)])
            return both.cpu().tolist()
        except Exception:
            return None

    def _sample_index(self, n, device):
        if n <= SAMPLES:
            return None
        key = (n, str(device))
        idx = self._samples.get(key)
        if idx is None:
            idx = self.torch.linspace(0, n - 1, SAMPLES, device=device).round().long()
            self._samples[key] = idx
        return idx

    def _backend(self):
        try:
            dist = self.torch.distributed
            if dist.is_available() and dist.is_initialized():
                return str(dist.get_backend())
        except Exception:
            pass
        return None

    # ------------------------------------------------------------------ files

    def _write(self, record, mode="a"):
        with self._lock, _ts_observe._open(self.path, mode, encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=_ts_observe._jsonable) + "\n")

    def _watch(self):
        """On the server's request (the job looks hung): Flight Recorder records and every thread's stack.

        Meanwhile, a heartbeat: the core marks progress on observed steps only; after them the run goes on
        (a hang at the end of an epoch comes later), so this thread marks each later iteration it sees
        finished. It runs while the main thread waits inside a collective, and never writes the core's
        temporary file."""
        request = os.path.join(self.obs.out_dir, REQUEST)
        progress = os.path.join(self.obs.out_dir, f"{_ts_observe.PROGRESS_PREFIX}{self.obs._tag()}.json")
        marked = 0
        while not self._requested:
            if os.path.exists(request):
                self._requested = True
                self._dump()
                return
            done = self.obs.k - 1
            if done > marked and not self.obs._observed(done):
                marked = done
                self._heartbeat(progress, done)
            time.sleep(WATCH_S)

    def _heartbeat(self, path, step):
        try:
            tmp = f"{path}.hb{os.getpid()}"
            with _ts_observe._open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"step": step, "time": time.time(), "pid": os.getpid(), "rank": self.rank}, fh)
            os.replace(tmp, path)
        except OSError:
            pass

    def _dump(self):
        out = self.obs.out_dir
        note: dict = {"time": time.time(), "pid": os.getpid()}
        try:
            data = self.torch._C._distributed_c10d._dump_fr_trace()
            folder = os.path.join(out, "fr")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"rank{self.rank}")
            with _ts_observe._open(path + ".tmp", "wb") as fh:
                fh.write(data)
            os.replace(path + ".tmp", path)
        except Exception as exc:
            note["flight_recorder_error"] = f"{type(exc).__name__}: {exc}"[:500]
        try:
            with _ts_observe._open(os.path.join(out, f"rank{self.rank}.stacks"), "w") as fh:
                faulthandler.dump_traceback(file=fh, all_threads=True)
        except Exception as exc:
            note["stack_error"] = f"{type(exc).__name__}: {exc}"[:500]
        _ts_observe._write_json(os.path.join(out, f"rank{self.rank}.dumped"), note)


class _no_autocast:
    """The digests reduce in float64 even inside the user's autocast region."""

    def __init__(self, torch):
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        self.contexts = [torch.autocast(d, enabled=False) for d in devices]

    def __enter__(self):
        for c in self.contexts:
            c.__enter__()

    def __exit__(self, *exc):
        for c in reversed(self.contexts):
            c.__exit__(*exc)
        return False


def _state(module):
    return [*module.parameters(), *module.buffers()]


def _join(label, name):
    name = common.strip_wrappers(name)
    return f"{label}.{name}" if name else label


def _sharded(t):
    """A shard by design: a DTensor placed as Shard, or an FSDP flat parameter."""
    if type(t).__name__ == "FlatParameter" or getattr(t, "_is_flat_param", False):
        return True
    placements = getattr(t, "placements", None)
    if placements is not None:
        try:
            return any(not p.is_replicate() for p in placements)
        except Exception:
            return True
    return False


def _tensor_leaves(name, value, torch, depth=0):
    """Tensors in an attribute: itself, or inside a small list/tuple/dict."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if depth >= 2:
        return []
    out = []
    if isinstance(value, (list, tuple)) and len(value) <= 16:
        for i, v in enumerate(value):
            out.extend(_tensor_leaves(f"{name}[{i}]", v, torch, depth + 1))
    elif isinstance(value, dict) and len(value) <= 16:
        for k, v in value.items():
            if isinstance(k, (str, int)):
                out.extend(_tensor_leaves(f"{name}[{k!r}]", v, torch, depth + 1))
    return out
