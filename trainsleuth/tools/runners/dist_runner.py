"""Distributed correctness check, run in the user's interpreter (torch + standard library only).

Launcher mode (default) starts `python -m torch.distributed.run --nproc_per_node N` on this same
script in worker mode, waits (with a timeout that kills the whole job), and merges the per-rank
reports into one JSON result.

Worker mode (one process per rank) loads the entrypoint, wraps the model (the entrypoint's own
`wrap_model(model)` hook, else DistributedDataParallel), takes a few steps on its shard and checks:
- parameters and buffers are identical across ranks as each forward pass sees them, and parameters
  after the last step (frozen parameters are flagged as such);
- gradients after backward are identical across ranks;
- parameters that require grad but got none (what breaks DDP without find_unused_parameters);
- loss and gradients of the first step match a single-process computation on the same global
  batch (rank 0 replays every shard on an unwrapped copy of its model and averages the gradients).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import _ts_dist_common as common  # noqa: E402
import _ts_entrypoint as ep  # noqa: E402

SEED = 1234
MAX_ROWS = 200


# ---------------------------------------------------------------------------- launcher


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid):
    """Every descendant pid (Linux /proc walk; psutil is not assumed in the user's interpreter)."""
    out = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
                out.extend(kids)
                stack.extend(kids)
        except OSError:
            continue
    return out


def _kill_job(proc):
    pids = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    for p in [proc.pid, *pids]:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except Exception:
        pass


def _tail(path, limit=6000):
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else "…" + text[-limit:]


def launch(args):
    out_dir = tempfile.mkdtemp(prefix="ts-dist-")
    port = args.master_port or _free_port()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc_per_node",
        str(args.nproc),
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(port),
        "--max_restarts",
        "0",
        os.path.abspath(__file__),
        "--worker",
        "--out",
        out_dir,
        "--entrypoint",
        args.entrypoint,
        "--steps",
        str(args.steps),
        "--backend",
        args.backend,
        "--rtol",
        repr(args.rtol),
        "--rank-rtol",
        repr(args.rank_rtol),
        "--collective-timeout",
        str(max(10, int(args.timeout * 0.8))),
    ]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["TS_DIST_CWD"] = os.getcwd()
    log_path = os.path.join(out_dir, "torchrun.log")
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_job(proc)
    duration = time.monotonic() - start
    ranks = []
    for r in range(args.nproc):
        path = os.path.join(out_dir, f"rank{r}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                ranks.append(json.load(fh))
        else:
            ranks.append({"rank": r, "missing": True})
    summary = None
    spath = os.path.join(out_dir, "summary.json")
    if os.path.exists(spath):
        with open(spath, encoding="utf-8") as fh:
            summary = json.load(fh)
    log_tail = _tail(log_path)
    payload = {
        "ok": True,
        "nproc": args.nproc,
        "command": [*cmd[:12], "<worker args>"],
        "returncode": proc.returncode,
        "timed_out": timed_out,
        "duration_s": duration,
        "ranks": ranks,
        "summary": summary,
        "log_tail": log_tail,
    }
    errors = [r.get("error") for r in ranks if r.get("error")]
    contract_errors = [e for e in errors if e.get("kind") != "other_rank_failed"]
    if summary is not None and summary.get("load_error"):
        payload = {"ok": False, "error": summary["load_error"]}
    elif contract_errors and summary is None:
        payload = {"ok": False, "error": contract_errors[0]}
    elif summary is None and not timed_out and "No module named 'torch'" in log_tail:
        payload = {
            "ok": False,
            "error": {"kind": "no_torch", "message": "torch is not installed in the target interpreter"},
        }
    ep.write_result(args.result, payload)
    return 0


# ---------------------------------------------------------------------------- worker


class RankCheck:
    def __init__(self, dist, torch, rank, world, comm_device, rank_rtol):
        self.dist = dist
        self.torch = torch
        self.rank = rank
        self.world = world
        self.comm_device = comm_device
        self.rank_rtol = rank_rtol

    def compare(self, named, phase, step, kind):
        """Broadcast rank 0's tensors and measure every rank's distance to them.

        Returns (on rank 0) a list of rows for the tensors that differ, plus a structure error
        when ranks disagree on names/shapes (values are then not compared, to avoid a hang)."""
        torch, dist = self.torch, self.dist
        meta = [(n, tuple(t.shape), str(t.dtype)) for n, t in named]
        metas = [None] * self.world
        dist.all_gather_object(metas, meta)
        if any(m != metas[0] for m in metas):
            bad = next(r for r, m in enumerate(metas) if m != metas[0])
            detail = _first_meta_difference(metas[0], metas[bad])
            return {
                "phase": phase,
                "step": step,
                "kind": kind,
                "structure_mismatch": {"rank": bad, "detail": detail},
                "rows": [],
                "compared": 0,
            }
        n = len(named)
        diffs = torch.zeros(max(n, 1), dtype=torch.float64)
        scales = torch.zeros(max(n, 1), dtype=torch.float64)
        for i, (_name, t) in enumerate(named):
            x = t.detach()
            if x.dtype == torch.bool:
                x = x.to(torch.uint8)
            x = x.to(self.comm_device).contiguous().clone()
            dist.broadcast(x, src=0)
            mine = t.detach().to("cpu", torch.float64)
            ref = x.to("cpu", torch.float64)
            if mine.numel():
                max_abs, _rel = common.rel_error(mine, ref)
                diffs[i] = max_abs
                fin = ref[torch.isfinite(ref)]
                scales[i] = float(fin.abs().max()) if fin.numel() else 0.0
        gathered = [torch.zeros_like(diffs).to(self.comm_device) for _ in range(self.world)]
        dist.all_gather(gathered, diffs.to(self.comm_device))
        rows = []
        if self.rank == 0:
            table = torch.stack([g.to("cpu") for g in gathered])  # world x n
            for i, (name, t) in enumerate(named):
                col = table[:, i]
                worst_rank = int(torch.argmax(col))
                max_abs = float(col[worst_rank])
                scale = float(scales[i])
                rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
                if max_abs > 0 and rel > self.rank_rtol:
                    rows.append(
                        {
                            "name": name,
                            "rank": worst_rank,
                            "max_abs_diff": common.jsonable(max_abs),
                            "rel_diff": common.jsonable(rel),
                            "ref_max_abs": common.jsonable(scale),
                            "requires_grad": bool(kind == "parameter" and t.requires_grad),
                            "differing_ranks": [r for r in range(self.world) if float(col[r]) > 0],
                        }
                    )
        return {"phase": phase, "step": step, "kind": kind, "rows": rows[:MAX_ROWS], "compared": n}


def _first_meta_difference(a, b):
    names_a = [m[0] for m in a]
    names_b = [m[0] for m in b]
    if names_a != names_b:
        only_a = [x for x in names_a if x not in set(names_b)]
        only_b = [x for x in names_b if x not in set(names_a)]
        return {"names_only_on_rank0": only_a[:20], "names_only_on_other": only_b[:20]}
    for ma, mb in zip(a, b, strict=False):
        if ma != mb:
            return {"name": ma[0], "rank0": [list(ma[1]), ma[2]], "other": [list(mb[1]), mb[2]]}
    return {}


def _named_params(inner):
    return [(common.strip_wrappers(n), p) for n, p in inner.named_parameters()]


def _named_buffers(inner):
    return [(common.strip_wrappers(n), b) for n, b in inner.named_buffers()]


def _is_fsdp(wrapped):
    return "FullyShardedDataParallel" in type(wrapped).__name__ or "FSDP" in type(wrapped).__name__


def worker(args):
    import copy
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    os.chdir(os.environ.get("TS_DIST_CWD", os.getcwd()))
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world else "gloo"
    device = None
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    comm_device = device if device is not None else torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=args.collective_timeout))
    report = {"rank": rank, "world_size": world, "backend": backend, "pid": os.getpid()}
    summary = {"backend": backend, "world_size": world, "steps_requested": args.steps, "notes": []}
    notes = summary["notes"]
    exit_code = 0
    try:
        torch.manual_seed(SEED)
        try:
            contract = ep.load_contract(args.entrypoint, os.getcwd())
            load_error = None
        except ep.EntrypointError as exc:
            contract = None
            load_error = exc.to_json()
        errors = [None] * world
        dist.all_gather_object(errors, load_error)
        if any(errors):
            report["error"] = load_error or {"kind": "other_rank_failed", "message": "another rank failed"}
            first = next(e for e in errors if e)
            if rank == 0:
                summary["load_error"] = first
            return
        model = contract["model"]
        if device is not None:
            model.to(device)
        batches = [common.to_device(b, device) for b in contract["batches"]]
        if len(batches) >= world:
            shards = batches[:world]
            summary["sharding"] = f"rank r uses batches[r] (first {world} of {len(batches)})"
        else:
            shards = common.split_batch(batches[0], world)
            if shards is None:
                raise ep.EntrypointError(
                    "contract_error",
                    f"the batch has fewer than {world} samples along dim 0, so it cannot be split across "
                    f"{world} ranks; return a larger batch or a list of {world} batches",
                    key="batch",
                )
            summary["sharding"] = f"the batch is split along dim 0 into {world} shards; rank r uses shard r"
        my_shard = shards[rank]
        loss_fn = contract.get("loss_fn")
        step_fn = contract.get("step_fn")
        wrap = contract.get("wrap_model")
        if wrap is not None:
            wrapped = wrap(model)
            if not isinstance(wrapped, torch.nn.Module):
                raise ep.EntrypointError(
                    "contract_error", "'wrap_model' must return a torch.nn.Module", key="wrap_model"
                )
            summary["wrapper"] = f"entrypoint wrap_model -> {type(wrapped).__name__}"
        else:
            from torch.nn.parallel import DistributedDataParallel as DDP

            if not any(p.requires_grad for p in model.parameters()):
                raise ep.EntrypointError(
                    "contract_error", "the model has no trainable parameters", key="model"
                )
            wrapped = DDP(model, device_ids=[local_rank] if device is not None else None)
            summary["wrapper"] = "DistributedDataParallel (default settings)"
        inner = common.unwrap_module(wrapped)
        optimizer = contract.get("optimizer")
        if optimizer is None and step_fn is None:
            optimizer = torch.optim.SGD([p for p in inner.parameters() if p.requires_grad], lr=0.01)
            notes.append("no optimizer in the entrypoint: steps use SGD(lr=0.01)")
        checker = RankCheck(dist, torch, rank, world, comm_device, args.rank_rtol)
        frozen = sorted(n for n, p in _named_params(inner) if not p.requires_grad)
        summary["frozen_params"] = frozen[:MAX_ROWS]
        summary["n_params"] = len(_named_params(inner))
        summary["n_buffers"] = len(_named_buffers(inner))
        comparisons = []

        ref_model = None
        if rank == 0 and step_fn is None and not _is_fsdp(wrapped):
            try:
                ref_model = copy.deepcopy(inner)
            except Exception as exc:
                notes.append(f"single-process comparison skipped: the model cannot be deep-copied ({exc})")
        elif step_fn is not None:
            notes.append(
                "single-process comparison skipped: the entrypoint has its own step_fn, which steps its own "
                "optimizer; cross-rank checks still ran"
            )
        elif _is_fsdp(wrapped):
            notes.append("single-process comparison skipped: FSDP shards the parameters")

        state = {"step": 0, "checked": -1}

        def pre_forward(_module, _inputs):
            if state["checked"] == state["step"]:
                return
            state["checked"] = state["step"]
            with torch.no_grad():
                comparisons.append(
                    checker.compare(_named_params(inner), "forward_entry", state["step"], "parameter")
                )
                bufs = [(n, b) for n, b in _named_buffers(inner)]
                if bufs:
                    comparisons.append(checker.compare(bufs, "forward_entry", state["step"], "buffer"))

        handle = inner.register_forward_pre_hook(pre_forward)
        losses = []
        unused_by_rank = None
        step_error = None
        grads_step1 = None
        for step in range(1, args.steps + 1):
            state["step"] = step
            torch.manual_seed(SEED + 1000 * step + rank)
            try:
                if step_fn is not None:
                    loss = step_fn(wrapped, my_shard)
                    loss_value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
                else:
                    optimizer.zero_grad(set_to_none=True)
                    loss = common.compute_loss(wrapped, my_shard, loss_fn)
                    loss.backward()
                    loss_value = float(loss.detach())
            except Exception as exc:
                step_error = {
                    "kind": "step_failed",
                    "step": step,
                    "message": f"{type(exc).__name__}: {exc}"[:2000],
                    "traceback": traceback.format_exc()[-3000:],
                }
            statuses = [None] * world
            dist.all_gather_object(statuses, step_error)
            if any(statuses):
                if rank == 0:
                    summary["step_errors"] = {str(r): s for r, s in enumerate(statuses) if s}
                break
            loss_t = torch.tensor([loss_value], dtype=torch.float64, device=comm_device)
            all_losses = [torch.zeros_like(loss_t) for _ in range(world)]
            dist.all_gather(all_losses, loss_t)
            losses.append([float(x) for x in all_losses])
            with torch.no_grad():
                named_grads = []
                unused = []
                for n, p in _named_params(inner):
                    if not p.requires_grad:
                        continue
                    if p.grad is None:
                        unused.append(n)
                    else:
                        named_grads.append((n, p.grad))
                if step == 1:
                    per_rank = [None] * world
                    dist.all_gather_object(per_rank, unused)
                    unused_by_rank = per_rank
                    grads_step1 = {n: g.detach().clone() for n, g in named_grads}
                names_by_rank = [None] * world
                dist.all_gather_object(names_by_rank, [n for n, _ in named_grads])
                if all(x == names_by_rank[0] for x in names_by_rank):
                    comparisons.append(checker.compare(named_grads, "after_backward", step, "gradient"))
                elif rank == 0:
                    notes.append(f"step {step}: ranks have gradients for different parameters; not compared")
            if step_fn is None:
                optimizer.step()
        handle.remove()
        with torch.no_grad():
            comparisons.append(
                checker.compare(_named_params(inner), "after_last_step", len(losses), "parameter")
            )

        if rank == 0:
            summary["losses"] = losses
            summary["unused_by_rank"] = unused_by_rank
            summary["comparisons"] = comparisons
            summary["steps_taken"] = len(losses)
            if ref_model is not None and grads_step1 is not None and losses:
                summary["single_process"] = _single_process(
                    torch, ref_model, shards, loss_fn, grads_step1, losses[0], args.rtol, frozen
                )
    except ep.EntrypointError as exc:
        report["error"] = exc.to_json()
        exit_code = 1
    except Exception as exc:
        report["error"] = {
            "kind": "worker_failed",
            "message": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": traceback.format_exc()[-3000:],
        }
        exit_code = 1
    finally:
        _write_json(os.path.join(args.out, f"rank{rank}.json"), report)
        if rank == 0 and (exit_code == 0 or "load_error" in summary):
            _write_json(os.path.join(args.out, "summary.json"), summary)
        if exit_code == 0:
            try:
                dist.destroy_process_group()
            except Exception:
                pass
    sys.exit(exit_code)


def _single_process(torch, ref_model, shards, loss_fn, grads_multi, losses_step1, rtol, frozen):
    """Replay step 1 without any wrapper: every shard through the copy, gradients averaged."""
    world = len(shards)
    ref_model.zero_grad(set_to_none=True)
    total = 0.0
    for i, shard in enumerate(shards):
        torch.manual_seed(SEED + 1000 * 1 + i)
        loss = common.compute_loss(ref_model, shard, loss_fn)
        (loss / world).backward()
        total += float(loss.detach()) / world
    multi_loss = sum(losses_step1) / world
    loss_rel = abs(multi_loss - total) / max(abs(total), 1e-12)
    rows = []
    compared = 0
    for name, p in ((common.strip_wrappers(n), p) for n, p in ref_model.named_parameters()):
        if not p.requires_grad:
            continue
        g_multi = grads_multi.get(name)
        if p.grad is None or g_multi is None:
            continue
        compared += 1
        max_abs, rel = common.rel_error(g_multi, p.grad)
        if rel > rtol:
            rows.append(
                {
                    "name": name,
                    "max_abs_diff": common.jsonable(max_abs),
                    "rel_diff": common.jsonable(rel),
                    "ref_grad_norm": common.jsonable(p.grad.detach().double().norm()),
                    "multi_grad_norm": common.jsonable(g_multi.detach().double().norm()),
                }
            )
    return {
        "loss_single": common.jsonable(total),
        "loss_multi": common.jsonable(multi_loss),
        "loss_rel_diff": common.jsonable(loss_rel),
        "rtol": rtol,
        "grads_compared": compared,
        "grad_mismatches": rows[:MAX_ROWS],
    }


def _write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, default=repr)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--result")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--rank-rtol", type=float, default=1e-6)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--collective-timeout", type=int, default=120)
    parser.add_argument("--master-port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if not args.result:
        parser.error("--result is required in launcher mode")
    try:
        return launch(args)
    except Exception as exc:
        ep.write_result(
            args.result,
            ep.unexpected_failure(exc),
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
