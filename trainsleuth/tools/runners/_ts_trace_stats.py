"""Tensor summaries for the differential tracer. Torch and the standard library only.

A trace never holds a tensor's values: each tensor is summarised as its size, mean, standard
deviation, L2 norm and a fingerprint (a weighted sum with fixed pseudo-random weights, so two tensors
with the same norm but permuted, sign-flipped or shifted values still differ). Everything is computed
in float64 on the tensor's own device with one host transfer. Very large tensors are summarised on a
fixed strided sample (the norm stays exact).
"""

import math

SAMPLE_ABOVE = 1 << 22  # elements: past this, mean/std/fingerprint use a strided sample
_WEIGHTS: dict = {}
_GOLDEN = 0.6180339887498949


def _weights(torch, n, device):
    key = (n, str(device))
    w = _WEIGHTS.get(key)
    if w is None:
        idx = torch.arange(n, dtype=torch.float64, device=device)
        w = torch.remainder(idx * _GOLDEN, 1.0) + 0.5
        if len(_WEIGHTS) > 64:
            _WEIGHTS.clear()
        _WEIGHTS[key] = w
    return w


def first_tensor(torch, value, depth=0):
    """The first floating-point tensor in an output (a tensor, a tuple/list, a dict, a ModelOutput)."""
    if isinstance(value, torch.Tensor):
        return value
    if depth > 3:
        return None
    if isinstance(value, (list, tuple)):
        for item in value[:8]:
            found = first_tensor(torch, item, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for item in list(value.values())[:8]:
            found = first_tensor(torch, item, depth + 1)
            if found is not None:
                return found
    return None


def summarise(torch, tensor):
    """{n, mean, std, norm, fp[, nonfinite]} of a tensor, or a shape-only record for non-float ones."""
    if tensor is None or not isinstance(tensor, torch.Tensor):
        return None
    try:
        t = tensor.detach()
        if t.is_sparse or t.device.type == "meta":
            return {"n": int(t.numel()), "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
        n = t.numel()
        if n == 0:
            return {"n": 0, "shape": list(t.shape)}
        if t.is_complex():
            t = torch.view_as_real(t)
        flat = t.reshape(-1).to(torch.float64)
        norm_src = flat
        if n > SAMPLE_ABOVE:
            stride = n // SAMPLE_ABOVE + 1
            flat = flat[::stride]
        finite = torch.isfinite(flat)
        bad = flat.numel() - finite.sum()
        clean = torch.where(finite, flat, torch.zeros((), dtype=flat.dtype, device=flat.device))
        m = clean.numel()
        w = _weights(torch, m, clean.device)
        norm = torch.linalg.vector_norm(torch.nan_to_num(norm_src, nan=0.0, posinf=0.0, neginf=0.0))
        s1 = clean.sum()
        s2 = (clean * clean).sum()
        fp = (clean * w).sum()
        vals = torch.stack([s1, s2, fp, norm, bad.to(torch.float64)]).tolist()
    except Exception as exc:  # an exotic tensor (a subclass, a lazy device): say so, never fail the run
        return {"n": int(getattr(tensor, "numel", lambda: 0)()), "error": type(exc).__name__}
    s1, s2, fp, norm, bad = vals
    mean = s1 / m
    var = max(s2 / m - mean * mean, 0.0)
    out = {
        "n": int(n),
        "mean": _r(mean),
        "std": _r(math.sqrt(var)),
        "norm": _r(norm),
        "fp": _r(fp),
    }
    if bad:
        out["nonfinite"] = int(bad)
    if list(tensor.shape) and len(tensor.shape) <= 6:
        out["shape"] = list(tensor.shape)
    dtype = str(tensor.dtype).replace("torch.", "")
    if dtype != "float32":
        out["dtype"] = dtype
    return out


def _r(x):
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    return float(f"{x:.12g}")


def scalar(value):
    """A float from a tensor or a number (clip_grad_norm_'s total norm), or None."""
    try:
        v = float(value)
    except Exception:
        return None
    return _r(v)
