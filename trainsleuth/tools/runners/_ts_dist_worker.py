"""One rank of the distributed check (torch + standard library only).

The rank loads each entrypoint, compares the model's parameters and buffers, the state derived
outside it and the global batch across ranks *before* wrapping, wraps (the entrypoint's own
`wrap_model`, else DDP), then takes a few steps on its shard comparing parameters and buffers at
every forward entry, gradients after every backward, parameters after the last step, and on
rank 0 replays step 1 in one process on an unwrapped copy (per-shard losses and averaged gradients).

So that a rank that hangs or dies still explains itself, every rank writes into the launcher's
folder: `rank<r>.log` (its stdout and stderr, with faulthandler's stack on a fatal signal),
`rank<r>.progress` (the phase it is in), and, when `dump.request` appears or a step raises,
`fr/rank<r>` (the Flight Recorder's pickled dump) and `rank<r>.stacks` (every thread's stack).
"""

import copy
import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback

import _ts_dist_common as common
import _ts_dist_compare as cmp
import _ts_entrypoint as ep

SEED = 1234
MAX_ROWS = cmp.MAX_ROWS
OUTSIDE_EVERY_STEP = 10_000_000  # values of state outside the model compared at every step


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, default=repr)
    os.replace(tmp, path)


class Beacon:
    """The rank's side of the launcher's watch: progress marks, and records on request."""

    def __init__(self, out, rank):
        self.out = out
        self.rank = rank
        self.seq = 0
        self.phase = None
        self.requested = False
        self.lock = threading.Lock()
        os.makedirs(os.path.join(out, "fr"), exist_ok=True)
        faulthandler.enable(file=sys.stderr, all_threads=True)
        if hasattr(signal, "SIGUSR1"):
            faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        threading.Thread(target=self._watch, name="trainsleuth-watch", daemon=True).start()

    def mark(self, phase, case=None, step=None):
        self.seq += 1
        self.phase = phase
        write_json(
            os.path.join(self.out, f"rank{self.rank}.progress"),
            {"seq": self.seq, "phase": phase, "case": case, "step": step, "time": time.time()},
        )

    def dump(self, reason):
        """The Flight Recorder's records and every thread's stack (the latest dump wins)."""
        with self.lock:
            note = {"reason": reason, "time": time.time()}
            try:
                import torch

                data = torch._C._distributed_c10d._dump_fr_trace()  # type: ignore[attr-defined]
                path = os.path.join(self.out, "fr", f"rank{self.rank}")
                with open(path + ".tmp", "wb") as fh:
                    fh.write(data)
                os.replace(path + ".tmp", path)
            except Exception as exc:
                note["flight_recorder_error"] = f"{type(exc).__name__}: {exc}"[:500]
            try:
                with open(os.path.join(self.out, f"rank{self.rank}.stacks"), "w") as fh:
                    faulthandler.dump_traceback(file=fh, all_threads=True)
            except Exception as exc:
                note["stack_error"] = f"{type(exc).__name__}: {exc}"[:500]
            write_json(os.path.join(self.out, f"rank{self.rank}.dumped"), note)

    def _watch(self):
        request = os.path.join(self.out, "dump.request")
        while True:
            if not self.requested and os.path.exists(request):
                self.requested = True
                self.dump("requested by the launcher")
            time.sleep(0.1)


# ---------------------------------------------------------------------------- one rank


def worker(args):
    os.chdir(os.environ.get("TS_DIST_CWD", os.getcwd()))
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    beacon = Beacon(args.out, rank)
    beacon.mark("import")
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world else "gloo"
    device = None
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    beacon.mark("init_process_group")
    timeout = timedelta(seconds=args.collective_timeout)
    dist.init_process_group(backend, timeout=timeout)
    # The check's own exchanges run on a separate group: they can never pair with the user's collectives.
    group = new_group(dist, timeout, "trainsleuth_check")
    # Errors are exchanged on a third group, so a rank reporting one never pairs with a comparison.
    status_group = new_group(dist, timeout, "trainsleuth_status")
    cmp.install_ddp_recorders(torch)
    env = {
        "torch": torch,
        "dist": dist,
        "rank": rank,
        "world": world,
        "device": device,
        "group": group,
        "status_group": status_group,
    }
    report = {"rank": rank, "world_size": world, "backend": backend, "pid": os.getpid(), "cases": []}
    cases = []
    exit_code = 0
    try:
        for index, spec in enumerate(args.entrypoint):
            summary = {
                "entrypoint": spec,
                "backend": backend,
                "world_size": world,
                "steps_requested": args.steps,
                "notes": [],
                "status": "running",
            }
            cases.append(summary)
            try:
                outcome = run_case(env, args, beacon, index, spec, summary, cases)
                case_error = None
            except Exception as exc:
                beacon.dump(f"{type(exc).__name__} in {beacon.phase}")
                traceback.print_exc()
                outcome = {"entrypoint": spec}
                case_error = {
                    "kind": "case_failed",
                    "phase": beacon.phase,
                    "message": f"{type(exc).__name__}: {exc}"[:3000],
                    "traceback": traceback.format_exc()[-3000:],
                }
            beacon.mark("case_end", index)
            statuses = gather_status(env, case_error)
            if any(statuses):
                summary["case_errors"] = {str(r): e for r, e in enumerate(statuses) if e}
            report["cases"].append(outcome)
            summary["status"] = "done" if not summary.get("load_error") else "load_error"
            if rank == 0:
                write_json(os.path.join(args.out, "summary.json"), {"cases": cases})
        beacon.mark("finished")
    except Exception as exc:
        beacon.dump(f"the rank failed: {type(exc).__name__}")
        report["error"] = {
            "kind": "worker_failed",
            "message": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": traceback.format_exc()[-4000:],
        }
        traceback.print_exc()
        exit_code = 1
    finally:
        write_json(os.path.join(args.out, f"rank{rank}.json"), report)
        if rank == 0 and cases:
            write_json(os.path.join(args.out, "summary.json"), {"cases": cases})
    if exit_code == 0:
        try:
            dist.destroy_process_group()
        except Exception:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave at once: interpreter teardown has aborted on some DDP configurations (static_graph).
    os._exit(exit_code)


def new_group(dist, timeout, desc):
    try:
        return dist.new_group(backend="gloo", timeout=timeout, group_desc=desc)
    except TypeError:  # torch < 2.3 names no groups
        return dist.new_group(backend="gloo", timeout=timeout)


def gather_status(env, status):
    out = [None] * env["world"]
    env["dist"].all_gather_object(out, status, group=env["status_group"])
    return out


def run_case(env, args, beacon, index, spec, summary, cases):
    torch, dist, rank, world, device = env["torch"], env["dist"], env["rank"], env["world"], env["device"]
    checker = cmp.RankCheck(dist, torch, rank, world, env["group"], args.rank_rtol)
    notes = summary["notes"]
    outcome = {"entrypoint": spec}

    def save():
        if rank == 0:
            write_json(os.path.join(args.out, "summary.json"), {"cases": cases})

    beacon.mark("loading", index)
    torch.manual_seed(SEED)
    try:
        contract = ep.load_contract(spec, os.getcwd())
        load_error = None
    except ep.EntrypointError as exc:
        contract = None
        load_error = exc.to_json()
    beacon.mark("loaded", index)
    errors = gather_status(env, load_error)
    if any(errors):
        first = next(e for e in errors if e)
        summary["load_error"] = first
        outcome["error"] = load_error or {"kind": "other_rank_failed", "message": "another rank failed"}
        return outcome
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
            summary["load_error"] = {
                "kind": "contract_error",
                "key": "batch",
                "message": f"the batch has fewer than {world} samples along dim 0, so it cannot be split "
                f"across {world} ranks; return a larger batch or a list of {world} batches",
            }
            return outcome
        summary["sharding"] = f"the batch is split along dim 0 into {world} shards; rank r uses shard r"
    my_shard = shards[rank]
    loss_fn = contract.get("loss_fn")
    step_fn = contract.get("step_fn")
    wrap = contract.get("wrap_model")
    comparisons: list = []
    summary["comparisons"] = comparisons

    # ---- before any wrapping: the model, state derived outside it, and the global batch
    beacon.mark("before_wrap", index)
    outside = cmp.discover_outside(contract, model, torch)
    summary["outside_state"] = sorted({label.split(".")[0].split("[")[0] for label, _t, _g in outside})[:50]
    outside_named = [(label, t) for label, t, _g in outside]
    every_step = sum(t.numel() for _label, t in outside_named) <= OUTSIDE_EVERY_STEP
    if not every_step and rank == 0:
        notes.append(
            f"the state outside the model holds more than {OUTSIDE_EVERY_STEP} values: compared before wrapping "
            "and after the last step only"
        )
    outside_frozen = {label for label, _t, g in outside if not g}
    with torch.no_grad():
        before = [
            checker.compare(cmp.named_params(model), "before_wrap", 0, "parameter"),
            checker.compare(cmp.named_buffers(model), "before_wrap", 0, "buffer"),
        ]
        if outside_named:
            before.append(checker.compare(outside_named, "before_wrap", 0, "outside"))
        before.append(
            checker.compare(cmp.batch_tensors(contract["batches"], torch), "before_wrap", 0, "input")
        )
    differing_before = checker.gather_object(
        sorted(
            {row["name"] for c in before for row in c.get("rows", []) if c["kind"] in ("parameter", "buffer")}
        )
        if rank == 0
        else None
    )[0]
    comparisons.extend(c for c in before if c.get("compared"))
    own_before = {}
    if differing_before:
        current = dict(cmp.named_params(model) + cmp.named_buffers(model))
        own_before = {n: current[n].detach().clone() for n in differing_before if n in current}
    ref_model = None
    if rank == 0 and step_fn is None:
        try:
            ref_model = copy.deepcopy(model)
        except Exception as exc:
            notes.append(f"single-process comparison skipped: the model cannot be deep-copied ({exc})")
    elif step_fn is not None and rank == 0:
        notes.append(
            "single-process comparison skipped: the entrypoint has its own step_fn, which steps its own "
            "optimizer; cross-rank checks still ran"
        )

    # ---- wrap as the user does
    beacon.mark("wrap", index)
    if wrap is not None:
        wrapped = wrap(model)
        if not isinstance(wrapped, torch.nn.Module):
            summary["load_error"] = {
                "kind": "contract_error",
                "key": "wrap_model",
                "message": "'wrap_model' must return a torch.nn.Module",
            }
            return outcome
        summary["wrapper"] = f"entrypoint wrap_model -> {type(wrapped).__name__}"
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP

        if not any(p.requires_grad for p in model.parameters()):
            summary["load_error"] = {
                "kind": "contract_error",
                "key": "model",
                "message": "the model has no trainable parameters",
            }
            return outcome
        wrapped = DDP(model, device_ids=[device.index] if device is not None else None)
        summary["wrapper"] = "DistributedDataParallel (default settings)"
    summary["default_wrap"] = wrap is None
    summary["wrappers"] = cmp.describe_wrappers(wrapped, model)
    save()
    inner = common.unwrap_module(wrapped)
    optimizer = contract.get("optimizer")
    if optimizer is None and step_fn is None:
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
        notes.append("no optimizer in the entrypoint: steps use SGD(lr=0.01)")
    frozen = sorted(n for n, p in cmp.named_params(model) if not p.requires_grad)
    summary["frozen_params"] = frozen[:MAX_ROWS]
    summary["n_params"] = len(cmp.named_params(model))
    summary["n_buffers"] = len(cmp.named_buffers(model))
    if any(w["kind"] in ("FSDP2", "FSDP") for w in summary["wrappers"]) and ref_model is not None:
        notes.append("FSDP shards the parameters: they are compared (and replayed) as full tensors")

    state = {"step": 0, "checked": -1}
    ref_values = {}

    def keep_ref(name, value):
        ref_values[name] = value

    def check_forward_entry():
        if state["checked"] == state["step"]:
            return
        state["checked"] = state["step"]
        step = state["step"]
        beacon.mark("compare_forward_entry", index, step)
        with torch.no_grad():
            comparisons.append(
                checker.compare(
                    cmp.named_params(model),
                    "forward_entry",
                    step,
                    "parameter",
                    keep=keep_ref if step == 1 and ref_model is not None else None,
                )
            )
            bufs = cmp.named_buffers(model)
            if bufs:
                comparisons.append(
                    checker.compare(
                        bufs,
                        "forward_entry",
                        step,
                        "buffer",
                        keep=keep_ref if step == 1 and ref_model else None,
                    )
                )
            if outside_named and every_step:
                comparisons.append(checker.compare(outside_named, "forward_entry", step, "outside"))
            if step == 1 and differing_before:
                current = dict(cmp.named_params(model) + cmp.named_buffers(model))
                names = [n for n in differing_before if n in current and n in own_before]
                flags = checker.equal_to_rank0([(current[n], own_before[n]) for n in names])
                summary["hidden_by_wrap"] = [
                    {"name": n, "equal_to_rank0_before": [f[i] for f in flags]} for i, n in enumerate(names)
                ]
        beacon.mark("forward", index, step)

    def pre_forward(_module, _inputs):
        check_forward_entry()

    handles = [model.register_forward_pre_hook(pre_forward, prepend=True)]
    if inner is not model:
        handles.append(inner.register_forward_pre_hook(pre_forward, prepend=True))
    losses = []
    unused_by_rank = None
    grads_step1: dict | None = None
    no_sync = []
    try:
        for step in range(1, args.steps + 1):
            state["step"] = step
            torch.manual_seed(SEED + 1000 * step + rank)
            step_error = None
            beacon.mark("step", index, step)
            try:
                if step_fn is not None:
                    loss = step_fn(wrapped, my_shard)
                    loss_value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
                else:
                    optimizer.zero_grad(set_to_none=True)
                    loss = common.compute_loss(wrapped, my_shard, loss_fn)
                    check_forward_entry()
                    beacon.mark("backward", index, step)
                    loss.backward()
                    loss_value = float(loss.detach())
            except Exception as exc:
                beacon.dump(f"step {step} raised {type(exc).__name__}")
                step_error = {
                    "kind": "step_failed",
                    "step": step,
                    "message": f"{type(exc).__name__}: {exc}"[:3000],
                    "traceback": traceback.format_exc()[-3000:],
                }
            check_forward_entry()
            beacon.mark("step_end", index, step)
            statuses = gather_status(env, step_error)
            if any(statuses):
                if rank == 0:
                    summary["step_errors"] = {str(r): s for r, s in enumerate(statuses) if s}
                break
            counts = cmp.ddp_forward_counts(wrapped, model)
            all_counts = checker.gather_object(counts)
            if rank == 0 and any(c[2] for per in all_counts for c in per):
                no_sync.append({"step": step, "by_rank": all_counts})
            loss_t = torch.tensor([loss_value], dtype=torch.float64)
            all_losses = [torch.zeros_like(loss_t) for _ in range(world)]
            dist.all_gather(all_losses, loss_t, group=env["group"])
            losses.append([float(x) for x in all_losses])
            beacon.mark("compare_gradients", index, step)
            with torch.no_grad():
                named_grads = []
                unused = []
                for n, p in cmp.named_params(model):
                    if not p.requires_grad:
                        continue
                    if p.grad is None:
                        unused.append(n)
                    else:
                        named_grads.append((n, p.grad))
                if step_fn is not None and not named_grads:
                    unused = []  # the step_fn cleared its gradients: nothing to say about them
                    if step == 1 and rank == 0:
                        notes.append("the step_fn leaves no gradients behind: gradients were not compared")
                if step == 1:
                    unused_by_rank = checker.gather_object(unused)
                names_by_rank = checker.gather_object([n for n, _ in named_grads])
                if all(x == names_by_rank[0] for x in names_by_rank):
                    if named_grads:
                        keep = None
                        if step == 1 and ref_model is not None:
                            grads_step1 = {}
                            keep = grads_step1.__setitem__
                        comparisons.append(
                            checker.compare(named_grads, "after_backward", step, "gradient", keep=keep)
                        )
                elif rank == 0:
                    notes.append(f"step {step}: ranks have gradients for different parameters; not compared")
            if step_fn is None:
                optimizer.step()
            save()
    finally:
        for h in handles:
            h.remove()
    beacon.mark("compare_final", index)
    with torch.no_grad():
        comparisons.append(
            checker.compare(cmp.named_params(model), "after_last_step", len(losses), "parameter")
        )
        if outside_named:
            comparisons.append(checker.compare(outside_named, "after_last_step", len(losses), "outside"))
    summary["wrappers"] = cmp.describe_wrappers(wrapped, model)
    summary["outside_frozen"] = sorted(outside_frozen)[:MAX_ROWS]
    if rank == 0:
        summary["losses"] = losses
        summary["unused_by_rank"] = unused_by_rank
        summary["no_sync"] = no_sync
        summary["steps_taken"] = len(losses)
        if ref_model is not None and grads_step1 is not None and losses and ref_values:
            beacon.mark("single_process", index)
            summary["single_process"] = single_process(
                torch, ref_model, ref_values, shards, loss_fn, grads_step1, losses[0], args.rtol
            )
    return outcome


def single_process(torch, ref_model, ref_values, shards, loss_fn, grads_multi, losses_step1, rtol):
    """Replay step 1 without any wrapper, from rank 0's weights at step 1: every shard through the
    copy, per-shard losses kept, gradients averaged."""
    with torch.no_grad():
        own = dict(cmp.named_params(ref_model) + cmp.named_buffers(ref_model))
        for name, value in ref_values.items():
            t = own.get(name)
            if t is not None and tuple(t.shape) == tuple(value.shape):
                t.copy_(value.to(t.dtype))
    world = len(shards)
    per_shard = []
    grads: dict = {}
    for i, shard in enumerate(shards):
        # a fresh copy per shard, as each rank started from the same state (stateful forwards, BN statistics)
        replica = copy.deepcopy(ref_model)
        replica.zero_grad(set_to_none=True)
        torch.manual_seed(SEED + 1000 * 1 + i)
        loss = common.compute_loss(replica, shard, loss_fn)
        (loss / world).backward()
        per_shard.append(float(loss.detach()))
        for name, p in cmp.named_params(replica):
            if p.grad is not None:
                g = p.grad.detach().to(torch.float64)
                grads[name] = grads[name] + g if name in grads else g
    total = sum(per_shard) / world
    multi_loss = sum(losses_step1) / world
    loss_rel = abs(multi_loss - total) / max(abs(total), 1e-12)
    loss_rows = []
    for r, (mine, ref) in enumerate(zip(losses_step1, per_shard, strict=True)):
        rel = abs(mine - ref) / max(abs(ref), 1e-12)
        if rel > rtol:
            loss_rows.append(
                {
                    "rank": r,
                    "loss": common.jsonable(mine),
                    "replay": common.jsonable(ref),
                    "rel_diff": common.jsonable(rel),
                }
            )
    rows = []
    compared = 0
    for name, p in cmp.named_params(ref_model):
        g_ref = grads.get(name)
        g_multi = grads_multi.get(name)
        if not p.requires_grad or g_ref is None or g_multi is None:
            continue
        compared += 1
        max_abs, rel = common.rel_error(g_multi, g_ref)
        if rel > rtol:
            rows.append(
                {
                    "name": name,
                    "max_abs_diff": common.jsonable(max_abs),
                    "rel_diff": common.jsonable(rel),
                    "ref_grad_norm": common.jsonable(g_ref.norm()),
                    "multi_grad_norm": common.jsonable(g_multi.detach().double().norm()),
                }
            )
    return {
        "loss_single": common.jsonable(total),
        "loss_multi": common.jsonable(multi_loss),
        "loss_rel_diff": common.jsonable(loss_rel),
        "loss_by_rank": loss_rows,
        "rtol": rtol,
        "grads_compared": compared,
        "grad_mismatches": rows[:MAX_ROWS],
    }
