"""Gradient accumulation equivalence: k accumulated micro-batches against one k-times larger batch.

Run once, before the probe's steps, when the entrypoint gives `step_fn` and an optimizer. The user's
`step_fn` runs on the fixed batch with its `optimizer.step()` intercepted (the step is not taken):
the probe sees how many backward passes reached the parameters (k), the sum of their gradients,
and what `.grad` held when the optimizer was called. The reference is the gradient of the loss of
the whole batch at the same parameters (`loss_fn` when given, else the model's own `.loss`).
Dropout and batch norm are put in eval mode for both (`train()` calls inside `step_fn` are
neutralised for the duration), so the two are comparable exactly; everything (parameters,
buffers, optimizer and scheduler state, RNG, gradients, train/eval flags) is restored afterwards.
Torch only.
"""

import copy
import math

import torch

try:
    from . import _ts_probe_tensors as tens
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_tensors as tens  # type: ignore[no-redef]


class _Stop(Exception):
    pass


def _no_train(self, mode=True):
    return self


def _cos_ratio(a, b):
    dot = sa = sb = 0.0
    for x, y in zip(a, b):  # noqa: B905
        if x is None or y is None:
            continue
        x = (x.to_dense() if x.layout != torch.strided else x).double()  # a sparse gradient
        y = (y.to_dense() if y.layout != torch.strided else y).double()
        dot += float((x * y).sum())
        sa += float((x * x).sum())
        sb += float((y * y).sum())
    if sa == 0 or sb == 0:
        return None, None
    return dot / math.sqrt(sa * sb), math.sqrt(sa / sb)


def check(contract, model, optimizer, batch, reference_loss):
    """Return the accumulation record for the rules, or None when step_fn does not accumulate."""
    step_fn = contract["step_fn"]
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    if optimizer is None or not params:
        return None
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt_state = copy.deepcopy(optimizer.state_dict())
    sched = contract.get("scheduler")
    sched_state = copy.deepcopy(sched.state_dict()) if sched is not None else None
    rng = torch.get_rng_state()
    flags = [(m, m.training) for m in model.modules()]
    old_grads = [p.grad for p in params]
    batch_ptrs = {tens.storage_ptr(t) for _, t in tens.leaf_paths(batch)}
    sums = [None] * len(params)
    fires = [0]
    foreign = []
    captured = {}
    handles = []

    def grad_hook(i):
        def hook(g):
            if i == 0:
                fires[0] += 1
            g = g.detach()
            sums[i] = g.clone() if sums[i] is None else sums[i] + g

        return hook

    def root_pre(module, args):
        t = next(iter(tens.iter_tensors(args)), None)
        if t is not None and tens.storage_ptr(t) not in batch_ptrs:
            foreign.append(tuple(t.shape))

    def opt_pre(opt, args, kwargs):
        captured["grads"] = [p.grad.detach().clone() if p.grad is not None else None for p in params]
        raise _Stop

    model.eval()
    for m in model.modules():
        m.train = _no_train.__get__(m)
    try:
        for i, p in enumerate(params):
            p.grad = None
            handles.append(p.register_hook(grad_hook(i)))
        handles.append(model.register_forward_pre_hook(root_pre))
        handles.append(optimizer.register_step_pre_hook(opt_pre))
        try:
            step_fn(model, batch)
        except _Stop:
            pass
        except Exception as exc:
            return {"skipped": f"step_fn raised {type(exc).__name__} during the accumulation check: {exc}"}
        for h in handles:
            h.remove()
        handles = []
        micro = max(1, fires[0])
        if "grads" not in captured or micro < 2:
            return None
        if foreign:
            return {
                "skipped": "step_fn feeds the model inputs that are not slices of the batch it is given "
                f"(e.g. shape {foreign[0]}), so no larger-batch reference exists",
                "micro_batches": micro,
            }
        for p in params:
            p.grad = None
        try:
            loss = reference_loss(model, batch)
            loss.backward()
        except Exception as exc:
            return {
                "skipped": f"no reference loss for the whole batch ({type(exc).__name__}: {exc}); give "
                "'loss_fn' beside 'step_fn'",
                "micro_batches": micro,
            }
        ref = [p.grad.detach().clone() if p.grad is not None else None for p in params]
        cos, ratio = _cos_ratio(sums, ref)
        kept, _ = _cos_ratio(captured["grads"], sums)
        return {
            "micro_batches": micro,
            "norm_ratio": ratio,
            "cosine": cos,
            "kept_cosine": kept,
            "measured": "sum of the micro-batch gradients (before clipping) vs the whole batch's gradient",
        }
    finally:
        for h in handles:
            h.remove()
        for m in model.modules():
            m.__dict__.pop("train", None)
        for m, f in flags:
            m.training = f
        model.load_state_dict(state)
        optimizer.load_state_dict(opt_state)
        if sched is not None:
            sched.load_state_dict(sched_state)
        torch.set_rng_state(rng)
        for p, g in zip(params, old_grads):  # noqa: B905
            p.grad = g
