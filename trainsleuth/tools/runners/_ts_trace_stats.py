"""Tensor summaries for the differential tracer. Torch and the standard library only.

A trace never holds a tensor's values: each tensor is summarised as its size, mean, standard
deviation, L2 norm and a fingerprint (a weighted sum with fixed pseudo-random weights, so two tensors
with the same norm but permuted, sign-flipped or shifted values still differ). Everything is computed
in float64 on the tensor's own device with one host transfer. Very large tensors are summarised on a
fixed strided sample (the norm stays exact).
"""

import math

SAMPLE_ABOVE = (
    1 << 22
)  # elements: past this, mean and fingerprint use a strided sample (the norm stays exact)
EXACT_BELOW = 1 << 16  # elements: up to this, sums in float64; above, in float32 (one pass each, BLAS dots)
_WEIGHTS: dict = {}
_GOLDEN = 0.6180339887498949


def _weights(torch, n, device, dtype):
    """A (2, n) matrix: the fingerprint's weights and ones, so one matrix-vector product gives both sums
    (BLAS kernels stay fast when the machine is busy; OpenMP reductions can slow down 40x there)."""
    key = (n, str(device), dtype)
    w = _WEIGHTS.get(key)
    if w is None:
        idx = torch.arange(n, dtype=torch.float64, device=device)
        w = torch.stack([torch.remainder(idx * _GOLDEN, 1.0) + 0.5, torch.ones_like(idx)]).to(dtype)
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
    """{n, mean, std, norm, fp[, nonfinite]} of a tensor, or a shape-only record for one without values."""
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
        flat = t.reshape(-1)
        dtype = torch.float64 if n <= EXACT_BELOW or flat.dtype == torch.float64 else torch.float32
        if flat.dtype != dtype:
            flat = flat.to(dtype)
        sample = flat[:: n // SAMPLE_ABOVE + 1] if n > SAMPLE_ABOVE else flat
        m = sample.numel()
        w = _weights(torch, m, sample.device, dtype)
        vals = _sums(torch, flat, sample, w)
        bad = 0
        if not all(v == v and abs(v) != float("inf") for v in vals):
            # Non-finite values (or squares past float32's range): count them, summarise the finite rest in float64.
            flat = flat.to(torch.float64)
            finite = torch.isfinite(flat)
            bad = int(flat.numel() - finite.sum().item())
            flat = torch.where(finite, flat, torch.zeros((), dtype=flat.dtype, device=flat.device))
            sample = flat[:: n // SAMPLE_ABOVE + 1] if n > SAMPLE_ABOVE else flat
            w = _weights(torch, m, sample.device, torch.float64)
            vals = _sums(torch, flat, sample, w)
    except Exception as exc:  # an exotic tensor (a subclass, a lazy device): say so, never fail the run
        return {"n": int(getattr(tensor, "numel", lambda: 0)()), "error": type(exc).__name__}
    s1, s2, fp = vals
    mean = s1 / m
    norm = math.sqrt(max(s2, 0.0))
    rms2 = s2 / n
    out = {
        "n": int(n),
        "mean": _r(mean),
        "std": _r(math.sqrt(max(rms2 - mean * mean, 0.0))),
        "norm": _r(norm),
        "fp": _r(fp),
    }
    if bad:
        out["nonfinite"] = bad
    if list(tensor.shape) and len(tensor.shape) <= 6:
        out["shape"] = list(tensor.shape)
    dtype_name = str(tensor.dtype).replace("torch.", "")
    if dtype_name != "float32":
        out["dtype"] = dtype_name
    return out


def _sums(torch, flat, sample, w):
    """[sum, sum of squares, fingerprint] with one host transfer."""
    both = torch.mv(w, sample)
    norm = torch.linalg.vector_norm(flat)
    fp, s1, n2 = torch.cat([both, norm.reshape(1)]).tolist()
    return [s1, n2 * n2, fp]


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
