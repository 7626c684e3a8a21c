"""Standalone resume-check runner (torch + standard library; runs in the user's interpreter).

    python resume_runner.py --result OUT.json --entrypoint SPEC --phase reference|resume
                            --ckpt PATH [--steps-before N] [--steps-after M] [--seed S]

`reference` trains N steps, saves a checkpoint (with the entrypoint's own `save(path)`, else the
state_dicts of model, optimizer, scheduler, scaler, EMA, the RNG states and the data position),
then goes on for M steps without interruption. `resume` starts fresh, restores the checkpoint
(the entrypoint's `load(path)`, else those state_dicts) and trains the same M steps. Both record
fingerprints of every piece of training state right after step N (or after the restore) and of
every later step, so the server can say which piece the resume did not restore.

The entrypoint contract is the probe's (`model`, `batch`/`batches`, `loss_fn` or `step_fn`,
`optimizer`) plus these optional keys:
- `scheduler`: an LR scheduler, stepped after every optimizer step (unless `step_fn` drives it);
- `scaler`: a `torch.amp.GradScaler` used for backward and step (unless `step_fn` does);
- `ema`: an EMA of the weights (a module, or an object with `state_dict()`); updated by `step_fn`,
  else through its `update_parameters(model)` / `update(model)` / `update()`;
- `next_batch`: a callable returning the next training batch, i.e. your own data stream, whose
  position your save/load must keep (without it the runner feeds `batch`/`batches` in turn);
- `save(path)` / `load(path)`: your own checkpoint code; `load` runs on freshly built objects.
"""

import argparse
import hashlib
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import _ts_entrypoint as ep  # noqa: E402

EXTRA_KEYS = ("scheduler", "scaler", "ema", "next_batch", "save", "load")


class RunError(Exception):
    def __init__(self, kind, message, key=None, tb=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.key = key
        self.tb = tb

    def to_json(self):
        return {"kind": self.kind, "message": self.message, "key": self.key, "traceback": self.tb}


# ---------------------------------------------------------------------------- seeding and contract


def seed_all(seed, torch):
    random.seed(seed)
    torch.manual_seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed(seed)
        except Exception:
            pass


def load(spec, torch):
    fn = ep.load_function(spec, os.getcwd())
    try:
        raw = fn()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ep.EntrypointError(
            "entrypoint_raised", f"{spec} raised {type(exc).__name__}: {exc}", tb=ep._tb_tail()
        ) from None
    if not isinstance(raw, dict):
        return ep.validate_contract(raw)
    placeholder = "next_batch" in raw and "batch" not in raw and "batches" not in raw
    checked = ep.validate_contract({**raw, "batch": torch.zeros(1)} if placeholder else raw)
    if placeholder:
        checked["batches"] = []
    for key in ("next_batch", "save", "load"):
        if raw.get(key) is not None and not callable(raw[key]):
            raise ep.EntrypointError("contract_error", f"'{key}' must be callable", key=key)
    if (raw.get("save") is None) != (raw.get("load") is None):
        missing = "load" if raw.get("load") is None else "save"
        raise ep.EntrypointError(
            "contract_error", "give both 'save' and 'load' (your checkpoint code), or neither", key=missing
        )
    if raw.get("step_fn") is None and raw.get("optimizer") is None:
        raise ep.EntrypointError(
            "contract_error",
            "check_resume trains: give 'optimizer' (and optionally 'scheduler', 'scaler'), or a 'step_fn' "
            "that does the whole training step",
            key="optimizer",
        )
    for key in EXTRA_KEYS:
        checked[key] = raw.get(key)
    checked["unknown_keys"] = [k for k in checked.get("unknown_keys", []) if k not in EXTRA_KEYS]
    return checked


# ---------------------------------------------------------------------------- one training step


def _call_model(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (list, tuple)):
        return model(*batch)
    return model(batch)


def compute_loss(c, batch, torch):
    model = c["model"]
    if c.get("loss_fn") is not None:
        out = c["loss_fn"](model, batch)
        if isinstance(out, dict):
            terms = [v for v in out.values() if isinstance(v, torch.Tensor)]
            if not terms:
                raise RunError(
                    "contract_error", "loss_fn returned a dict without tensor terms", key="loss_fn"
                )
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            return total
        return out
    out = _call_model(model, batch)
    for cand in (out, getattr(out, "loss", None), out.get("loss") if isinstance(out, dict) else None):
        if isinstance(cand, torch.Tensor) and cand.numel() == 1:
            return cand.reshape(())
    raise RunError(
        "contract_error",
        "cannot find a loss: the model output has no .loss / ['loss'] and is not a scalar; add 'loss_fn'",
        key="loss_fn",
    )


def _update_ema(ema, model):
    for name in ("update_parameters", "update"):
        fn = getattr(ema, name, None)
        if fn is None:
            continue
        try:
            fn(model)
        except TypeError:
            fn()
        return


class Trainer:
    def __init__(self, c, torch):
        self.c = c
        self.torch = torch
        self.position = 0  # batches consumed, when the runner feeds `batches`

    def next_batch(self):
        if self.c.get("next_batch") is not None:
            return self.c["next_batch"]()
        batches = self.c["batches"]
        b = batches[self.position % len(batches)]
        self.position += 1
        return b

    def step(self, batch):
        torch = self.torch
        c = self.c
        model = c["model"]
        model.train()
        try:
            if c.get("step_fn") is not None:
                loss = c["step_fn"](model, batch)
            else:
                opt = c["optimizer"]
                scaler = c.get("scaler")
                opt.zero_grad(set_to_none=True)
                loss = compute_loss(c, batch, torch)
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    opt.step()
                if c.get("scheduler") is not None:
                    c["scheduler"].step()
                if c.get("ema") is not None:
                    _update_ema(c["ema"], model)
        except RunError:
            raise
        except Exception as exc:
            raise RunError("step_raised", f"the training step raised {type(exc).__name__}: {exc}",
                           tb=ep._tb_tail()) from None  # fmt: skip
        try:
            return float(loss.detach() if isinstance(loss, torch.Tensor) else loss)
        except Exception:
            raise RunError(
                "contract_error", f"the step's loss is not a number ({type(loss).__name__})", key="step_fn"
            ) from None


# ---------------------------------------------------------------------------- fingerprints


def tensor_fp(t, torch):
    """[sum, sum of squares, position-weighted sum, numel] in float64: equal tensors give equal
    fingerprints, and any realistic change shows."""
    x = t.detach()
    if x.is_complex():
        x = torch.view_as_real(x)
    x = x.to("cpu", torch.float64).reshape(-1)
    n = x.numel()
    if n == 0:
        return [0.0, 0.0, 0.0, 0]
    w = (torch.arange(n, dtype=torch.float64) % 251) + 1.0
    vals = [float(x.sum()), float((x * x).sum()), float((x * w).sum())]
    return [ep.finite_or_none(v) for v in vals] + [n]


def _flat(obj, prefix, out, torch, depth=0):
    if isinstance(obj, torch.Tensor):
        out[prefix] = tensor_fp(obj, torch)
    elif isinstance(obj, dict) and depth < 8:
        for k, v in obj.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out, torch, depth + 1)
    elif isinstance(obj, (list, tuple)) and depth < 8 and len(obj) <= 10000:
        for i, v in enumerate(obj):
            _flat(v, f"{prefix}.{i}" if prefix else str(i), out, torch, depth + 1)
    elif isinstance(obj, (int, float, bool, str)) or obj is None:
        out[prefix] = ep.finite_or_none(obj) if isinstance(obj, float) else obj
    else:
        out[prefix] = repr(obj)[:120]


def _digest(obj):
    return hashlib.sha1(repr(obj).encode()).hexdigest()[:16]


def rng_fp(torch):
    out = {"torch": tensor_fp(torch.get_rng_state(), torch), "python": _digest(random.getstate())}
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            st = np.random.get_state()
            out["numpy"] = _digest((st[0], st[1].tolist(), st[2:]))
        except Exception:
            pass
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            out["cuda"] = [tensor_fp(s, torch) for s in torch.cuda.get_rng_state_all()]
    except Exception:
        pass
    return out


def state_fp(c, torch):
    """Fingerprints of every piece of training state the runner can see."""
    model = c["model"]
    params = {n for n, _ in model.named_parameters()}
    fp: dict = {"model": {}, "buffers": {}}
    for name, t in model.state_dict().items():
        fp["model" if name in params else "buffers"][name] = tensor_fp(t, torch)
    opt = c.get("optimizer")
    if opt is not None:
        sd = opt.state_dict()
        state: dict = {}
        _flat(sd.get("state", {}), "", state, torch)
        fp["optimizer_state"] = state
        groups: dict = {}
        for i, g in enumerate(sd.get("param_groups", [])):
            for k, v in g.items():
                if k != "params":
                    _flat(v, f"{i}.{k}", groups, torch)
        fp["optimizer_groups"] = groups
        fp["lr"] = [ep.finite_or_none(g.get("lr")) for g in opt.param_groups]
    for key in ("scheduler", "scaler"):
        obj = c.get(key)
        if obj is not None and hasattr(obj, "state_dict"):
            flat: dict = {}
            try:
                _flat(obj.state_dict(), "", flat, torch)
            except Exception as exc:
                flat = {"<state_dict failed>": f"{type(exc).__name__}: {exc}"[:200]}
            fp[key] = flat
    ema = c.get("ema")
    if ema is not None:
        flat = {}
        if hasattr(ema, "state_dict"):
            _flat(ema.state_dict(), "", flat, torch)
        else:
            _flat(vars(ema), "", flat, torch)
        fp["ema"] = flat
    fp["rng"] = rng_fp(torch)
    return fp


def batch_fp(batch, torch):
    flat: dict = {}
    _flat(batch, "", flat, torch)
    return _digest(sorted(flat.items()))


def model_fp(model, torch):
    total = [0.0, 0.0, 0.0]
    for t in model.state_dict().values():
        f = tensor_fp(t, torch)
        for i in range(3):
            total[i] += f[i] if isinstance(f[i], float) else float("nan")
    return [ep.finite_or_none(v) for v in total]


# ---------------------------------------------------------------------------- save / restore


def default_save(c, trainer, path, torch):
    state = {
        "data_position": trainer.position,
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
    }
    np = sys.modules.get("numpy")
    if np is not None:
        state["rng"]["numpy"] = np.random.get_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["rng"]["cuda"] = torch.cuda.get_rng_state_all()
    for key in ("model", "optimizer", "scheduler", "scaler", "ema"):
        obj = c.get(key)
        if obj is not None and hasattr(obj, "state_dict"):
            state[key] = obj.state_dict()
    torch.save(state, path)


def default_load(c, trainer, path, torch, steps_before):
    state = torch.load(path, map_location="cpu", weights_only=False)  # written by this runner just now
    for key in ("model", "optimizer", "scheduler", "scaler", "ema"):
        obj = c.get(key)
        if obj is not None and key in state:
            obj.load_state_dict(state[key])
    if c.get("next_batch") is not None:
        for _ in range(steps_before):  # your stream has no state_dict: replay it to the same position
            c["next_batch"]()
    trainer.position = state["data_position"]
    rng = state["rng"]
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in rng:
        np.random.set_state(rng["numpy"])
    if "cuda" in rng:
        torch.cuda.set_rng_state_all(rng["cuda"])


def call_user(fn, path, what):
    try:
        fn(path)
    except Exception as exc:
        raise RunError(f"{what}_raised", f"your {what}(path) raised {type(exc).__name__}: {exc}",
                       key=what, tb=ep._tb_tail()) from None  # fmt: skip


# ---------------------------------------------------------------------------- phases


def record(trainer, step, torch):
    c = trainer.c
    batch = trainer.next_batch()
    rec = {"step": step, "batch": batch_fp(batch, torch)}
    rec["loss"] = ep.finite_or_none(trainer.step(batch))
    rec["model"] = model_fp(c["model"], torch)
    opt = c.get("optimizer")
    if opt is not None:
        rec["lr"] = ep.finite_or_none(opt.param_groups[0].get("lr"))
        state: dict = {}
        _flat(opt.state_dict().get("state", {}), "", state, torch)
        rec["optimizer"] = _digest(sorted(state.items()))
    return rec


def run_phase(args, torch):
    seed_all(args.seed, torch)
    c = load(args.entrypoint, torch)
    user_code = c.get("save") is not None
    trainer = Trainer(c, torch)
    payload = {
        "ok": True,
        "phase": args.phase,
        "mode": "user save/load" if user_code else "state_dict",
        "keys": sorted(
            k
            for k in ("scheduler", "scaler", "ema", "next_batch", "step_fn", "optimizer")
            if c.get(k) is not None
        ),
        "unknown_keys": c.get("unknown_keys", []),
        "init": {"model": model_fp(c["model"], torch)},
        "steps": [],
    }
    n, m = args.steps_before, args.steps_after
    if args.phase == "reference":
        for step in range(1, n + 1):
            payload["steps"].append(record(trainer, step, torch))
        if user_code:
            call_user(c["save"], args.ckpt, "save")
        else:
            default_save(c, trainer, args.ckpt, torch)
        if not os.path.exists(args.ckpt) and user_code:
            payload["notes"] = ["save(path) wrote nothing at path (it may write elsewhere)"]
        with open(args.ckpt + ".ready", "w") as fh:  # the resumed process may load it now
            fh.write("ready")
    else:
        # built while the uninterrupted run trains; restore once its checkpoint is complete
        deadline = time.monotonic() + args.wait
        while not os.path.exists(args.ckpt + ".ready"):
            if time.monotonic() > deadline:
                raise RunError("no_checkpoint", "the uninterrupted run did not finish its save in time")
            time.sleep(0.05)
        if not os.path.exists(args.ckpt):
            raise RunError("no_checkpoint", f"the reference run left no checkpoint at {args.ckpt}")
        if user_code:
            call_user(c["load"], args.ckpt, "load")
        else:
            default_load(c, trainer, args.ckpt, torch, n)
        if user_code and c.get("next_batch") is None:
            trainer.position = n  # the runner feeds `batches`: it keeps the position itself
    payload["boundary"] = state_fp(c, torch)
    for step in range(n + 1, n + m + 1):
        payload["steps"].append(record(trainer, step, torch))
    return payload


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--result", required=True)
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--phase", choices=("reference", "resume"), required=True)
    parser.add_argument("--ckpt", default=None)
    parser.add_argument("--steps-before", type=int, default=4)
    parser.add_argument("--steps-after", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wait", type=float, default=0.0, help="resume: wait this long for the checkpoint")
    args = parser.parse_args(argv)
    tmp = None
    try:
        import torch

        if args.ckpt is None:
            tmp = tempfile.mkdtemp(prefix="trainsleuth-resume-")
            args.ckpt = os.path.join(tmp, "ckpt.pt")
        payload = run_phase(args, torch)
    except ep.EntrypointError as exc:
        payload = {"ok": False, "error": exc.to_json()}
    except RunError as exc:
        payload = {"ok": False, "error": exc.to_json()}
    except Exception as exc:
        payload = ep.unexpected_failure(exc)
    ep.write_result(args.result, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
