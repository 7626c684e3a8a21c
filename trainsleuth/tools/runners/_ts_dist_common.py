"""Helpers shared by the distributed and precision runners (torch + standard library only).

Runs inside the user's interpreter next to `_ts_entrypoint.py`: computing a loss the way the
entrypoint contract describes, splitting and moving batches, and comparing tensors.
"""

import math

WRAPPER_TOKENS = ("module.", "_orig_mod.", "_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")


def strip_wrappers(name):
    """`module.encoder._orig_mod.fc.weight` -> `encoder.fc.weight` (DDP, compile, FSDP wrappers)."""
    changed = True
    while changed:
        changed = False
        for tok in WRAPPER_TOKENS:
            if name.startswith(tok):
                name = name[len(tok) :]
                changed = True
            elif "." + tok in name:
                name = name.replace("." + tok, ".")
                changed = True
    return name


def unwrap_module(model):
    """The user's own module inside DDP / DataParallel / torch.compile wrappers."""
    seen = 0
    while seen < 8:
        seen += 1
        inner = getattr(model, "_orig_mod", None)
        if inner is not None:
            model = inner
            continue
        inner = getattr(model, "module", None)
        import torch

        if isinstance(inner, torch.nn.Module) and type(model).__name__ in (
            "DistributedDataParallel",
            "DataParallel",
        ):
            model = inner
            continue
        break
    return model


def tree_map(fn, obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: tree_map(fn, v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(tree_map(fn, v) for v in obj)
    if isinstance(obj, list):
        return [tree_map(fn, v) for v in obj]
    return obj


def to_device(batch, device):
    if device is None:
        return batch
    return tree_map(lambda t: t.to(device), batch)


def batch_size(batch):
    sizes = []

    def visit(t):
        if t.dim() > 0:
            sizes.append(t.shape[0])
        return t

    tree_map(visit, batch)
    if not sizes:
        return None
    return min(sizes)


def split_batch(batch, parts):
    """Split every tensor of a batch along dim 0 into `parts` shards (rank r gets shard r)."""
    import torch

    size = batch_size(batch)
    if size is None or size < parts:
        return None

    shards = []
    for i in range(parts):

        def take(t, i=i):
            if t.dim() == 0 or t.shape[0] != size:
                return t
            return torch.tensor_split(t, parts, dim=0)[i]

        shards.append(tree_map(take, batch))
    return shards


def _first_scalar(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out if out.numel() == 1 else None
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
        return out["loss"]
    return None


def call_model(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def compute_loss(model, batch, loss_fn=None):
    """The contract's loss: `loss_fn(model, batch)` (a scalar or a dict of terms, summed),
    else the model's output `.loss`, `["loss"]`, or a scalar output."""
    import torch

    if loss_fn is not None:
        out = loss_fn(model, batch)
        if isinstance(out, dict):
            terms = [v for v in out.values() if isinstance(v, torch.Tensor)]
            if not terms:
                raise ValueError("loss_fn returned a dict without tensor terms")
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            return total
        if not isinstance(out, torch.Tensor) or out.numel() != 1:
            raise ValueError("loss_fn must return a scalar tensor or a dict of scalar tensors")
        return out.reshape(())
    out = call_model(model, batch)
    loss = _first_scalar(out)
    if loss is None:
        raise ValueError(
            "cannot find a loss: the model output has no .loss / ['loss'] and is not a scalar; "
            "add 'loss_fn' to the entrypoint"
        )
    return loss.reshape(())


def rel_error(a, b):
    """(max |a-b|, ||a-b|| / ||b||) as Python floats, in float64; NaN/Inf mismatches count as inf."""
    import torch

    a = a.detach().to("cpu", torch.float64)
    b = b.detach().to("cpu", torch.float64)
    if a.shape != b.shape:
        return math.inf, math.inf
    if a.numel() == 0:
        return 0.0, 0.0
    both_nan = torch.isnan(a) & torch.isnan(b)
    same_inf = torch.isinf(a) & torch.isinf(b) & (a == b)
    d = (a - b).abs()
    d = torch.where(both_nan | same_inf, torch.zeros_like(d), d)
    d = torch.where(torch.isnan(d), torch.full_like(d, math.inf), d)
    max_abs = float(d.max())
    ok = ~(both_nan | same_inf)
    ref = b[ok & torch.isfinite(b)]
    ref_norm = float(ref.norm()) if ref.numel() else 0.0
    diff_norm = float(d.norm()) if math.isfinite(max_abs) else math.inf
    if diff_norm == 0.0:
        return max_abs, 0.0
    return max_abs, (diff_norm / ref_norm if ref_norm > 0 else math.inf)


def jsonable(x):
    """Floats for JSON (NaN/Inf as strings)."""
    try:
        x = float(x)
    except Exception:
        return None
    if x != x:
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x
