"""Tensor helpers of the probe: walking nested outputs, finiteness, finding the loss. Torch only."""

import dataclasses
from collections.abc import Mapping

import torch


def iter_tensors(obj, depth=0):
    """Every tensor in a (nested) structure: tensors, lists, tuples, dicts, dataclasses, HF-style outputs."""
    if isinstance(obj, torch.Tensor):
        yield obj
        return
    if depth > 5 or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return
    if isinstance(obj, dict):
        for v in obj.values():
            yield from iter_tensors(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj[:256]:
            yield from iter_tensors(v, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for fld in dataclasses.fields(obj):
            yield from iter_tensors(getattr(obj, fld.name, None), depth + 1)


def float_tensors(obj):
    for t in iter_tensors(obj):
        if t.is_floating_point() or t.is_complex():
            yield t


SPARSE_COMPRESSED = tuple(
    getattr(torch, name)
    for name in ("sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")
    if hasattr(torch, name)
)


def stored_values(t):
    """The values a sparse tensor stores (COO duplicates summed), else the tensor itself.

    Norms, finiteness and non-zero tests read these: a sparse gradient (`nn.Embedding(sparse=True)`,
    `EmbeddingBag`) is a gradient whose absent entries are zeros, and most dense kernels refuse it."""
    if t.layout == torch.sparse_coo:
        return t.coalesce().values()
    if t.layout in SPARSE_COMPRESSED:
        return t.values()
    return t


def grad_dot(g, d):
    """sum(g * d) for a gradient `g` (dense or sparse) and a dense update `d` of the same shape."""
    if g.layout == torch.sparse_coo:
        g = g.coalesce()
        if g.sparse_dim() == 1 and g.indices().numel():
            rows = d.index_select(0, g.indices()[0])
            return (g.values().float() * rows.float()).sum()
        return (g.to_dense().float() * d.float()).sum()
    if g.layout != torch.strided:
        return (g.to_dense().float() * d.float()).sum()
    return (g.float() * d.float()).sum()


def tensor_finite(t):
    """True when every element is finite. A finite sum proves it in one cheap pass."""
    with torch.no_grad():
        t = stored_values(t)
        if t.numel() == 0:
            return True
        if bool(torch.isfinite(t.detach().sum())):
            return True
        return bool(torch.isfinite(t.detach()).all())


def version(t):
    try:
        return t._version
    except Exception:
        return -1


def extract_loss(output):
    """`.loss`, `["loss"]`, a scalar output, or the one scalar that needs grad in a tuple
    (nanoGPT's `logits, loss = model(x, y)`); None when there is none."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(output, dict) and isinstance(output.get("loss"), torch.Tensor):
        return output["loss"]
    if isinstance(output, torch.Tensor) and output.numel() == 1:
        return output
    if isinstance(output, tuple) and 1 < len(output) <= 4:
        scalars = [
            t for t in output if isinstance(t, torch.Tensor) and t.numel() == 1 and t.is_floating_point()
        ]
        if len(scalars) == 1:
            return scalars[0]
    return None


def leaf_paths(obj, path=(), depth=0):
    """(path, tensor) for every tensor of a batch: paths are tuples of keys/indices."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
        return
    if depth > 5:
        return
    if isinstance(obj, Mapping):  # a dict, or a UserDict batch (Hugging Face BatchEncoding)
        for k, v in obj.items():
            yield from leaf_paths(v, (*path, k), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:256]):
            yield from leaf_paths(v, (*path, i), depth + 1)


def get_path(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def storage_ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None
