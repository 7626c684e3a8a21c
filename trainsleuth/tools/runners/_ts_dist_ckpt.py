"""Checkpoint structure comparison shared by the server (numpy, safetensors) and the checkpoint
runner (torch, in the user's interpreter). Standard library only: keys, shapes, dtypes, prefixes.

A side is described as `{key: (shape_list, dtype_name)}` with canonical dtype names
(`float32`, `bfloat16`, `int64`, ...). `match_keys` pairs keys of two sides, explaining prefix
differences (DDP `module.`, torch.compile `_orig_mod.`, FSDP wrapper names and flat parameters,
nested checkpoints such as `{'model': state_dict}`).
"""

import json
import os
import struct

SAFETENSORS_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}

WRAPPERS = (
    (
        "module.",
        "DistributedDataParallel / DataParallel",
        "save model.module.state_dict(), or strip the prefix with "
        "torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state_dict, 'module.')",
    ),
    (
        "_orig_mod.",
        "torch.compile",
        "save the original module's state_dict (model._orig_mod.state_dict()), or strip '_orig_mod.'",
    ),
    (
        "_fsdp_wrapped_module.",
        "FSDP (wrapped module names)",
        "save with FSDP's FULL_STATE_DICT or torch.distributed.checkpoint.state_dict.get_model_state_dict",
    ),
    (
        "_checkpoint_wrapped_module.",
        "activation checkpointing wrapper",
        "save the state dict of the unwrapped module, or strip '_checkpoint_wrapped_module.'",
    ),
)
FLAT_PARAM_MARKERS = ("_flat_param", "flat_param")
MAX_HEADER = 100 * 1024 * 1024


class CheckpointError(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def sniff(path):
    """'safetensors', 'torch_zip', 'pickle' or 'unknown' from the first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(9)
    except OSError as exc:
        raise CheckpointError("unreadable", f"cannot read {path}: {exc}") from None
    if head[:2] == b"PK":
        return "torch_zip"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80":
        return "pickle"
    if os.path.isdir(path):
        return "directory"
    return "unknown"


def read_safetensors_header(path):
    """(tensors {name: {dtype, shape, data_offsets}}, data_start, metadata), validated."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise CheckpointError("bad_safetensors", f"{path} is too short to be a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > MAX_HEADER or 8 + n > size:
            raise CheckpointError("bad_safetensors", f"{path}: header length {n} does not fit the file")
        try:
            header = json.loads(fh.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CheckpointError("bad_safetensors", f"{path}: unreadable header ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError("bad_safetensors", f"{path}: the header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    data_start = 8 + n
    tensors = {}
    for name, info in header.items():
        try:
            dtype = SAFETENSORS_DTYPES.get(info["dtype"], str(info["dtype"]).lower())
            shape = [int(x) for x in info["shape"]]
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError("bad_safetensors", f"{path}: malformed entry for tensor {name!r}") from None
        if begin < 0 or end < begin or data_start + end > size:
            raise CheckpointError("bad_safetensors", f"{path}: tensor {name!r} lies outside the file")
        tensors[name] = {
            "dtype": dtype,
            "raw_dtype": info["dtype"],
            "shape": shape,
            "data_offsets": [begin, end],
        }
    return tensors, data_start, metadata


def _strip_tokens(key):
    """Remove wrapper tokens wherever they occur; return (new key, tokens removed)."""
    removed = []
    changed = True
    while changed:
        changed = False
        for tok, _w, _f in WRAPPERS:
            if key.startswith(tok):
                key = key[len(tok) :]
                removed.append(tok)
                changed = True
            elif "." + tok in key:
                key = key.replace("." + tok, ".")
                removed.append(tok)
                changed = True
    return key, removed


def _leading_prefix(keys):
    """The dotted first component shared by every key ('model.' for {'model': sd}), or None."""
    if not keys:
        return None
    firsts = {k.split(".", 1)[0] for k in keys}
    if len(firsts) != 1 or not all("." in k for k in keys):
        return None
    return next(iter(firsts)) + "."


def match_keys(meta_a, meta_b, label_a="a", label_b="b"):
    """Pair the keys of two sides and explain how their names differ.

    Returns a dict with `pairs` [(key_a, key_b)], `only_in_a`, `only_in_b`, `prefix_notes`,
    `shape_mismatches`, `dtype_mismatches`, `fsdp_flat`."""
    keys_a = list(meta_a)
    keys_b = list(meta_b)
    notes = []

    def norm_side(keys, label):
        out: dict = {}
        seen_tokens: dict = {}
        for k in keys:
            nk, removed = _strip_tokens(k)
            for tok in removed:
                seen_tokens[tok] = seen_tokens.get(tok, 0) + 1
            out.setdefault(nk, k)
        return out, seen_tokens

    exact = set(keys_a) & set(keys_b)
    norm_a, tok_a = norm_side(keys_a, label_a)
    norm_b, tok_b = norm_side(keys_b, label_b)
    # A leading container prefix on one side only ('model.' from {'model': state_dict}).
    for side_norm, other_norm, label in ((norm_a, norm_b, label_a), (norm_b, norm_a, label_b)):
        prefix = _leading_prefix(list(side_norm))
        if prefix and _leading_prefix(list(other_norm)) != prefix:
            stripped = {k[len(prefix) :]: v for k, v in side_norm.items()}
            gain = len(set(stripped) & set(other_norm)) - len(set(side_norm) & set(other_norm))
            if gain > 0:
                side_norm.clear()
                side_norm.update(stripped)
                notes.append(
                    {
                        "side": label,
                        "prefix": prefix,
                        "cause": "nested checkpoint or wrapper attribute",
                        "explanation": (
                            f"every key of {label} sits under {prefix!r} (a checkpoint like "
                            f"{{'{prefix[:-1]}': state_dict, ...}} or a module kept as an attribute)"
                        ),
                        "fix": f"load checkpoint[{prefix[:-1]!r}] or strip the {prefix!r} prefix before load_state_dict",
                    }
                )
    normalized_overlap = len(set(norm_a) & set(norm_b))
    use_norm = normalized_overlap > len(exact)
    if use_norm:
        for tok, wrapper, fix in WRAPPERS:
            ca, cb = tok_a.get(tok, 0), tok_b.get(tok, 0)
            if ca == cb:
                continue
            side = label_a if ca > cb else label_b
            notes.append(
                {
                    "side": side,
                    "prefix": tok,
                    "cause": wrapper,
                    "explanation": f"keys of {side} carry {tok!r}: saved from a model wrapped in {wrapper}",
                    "fix": fix,
                }
            )
        pairs = [(norm_a[k], norm_b[k]) for k in norm_a if k in norm_b]
    else:
        pairs = [(k, k) for k in keys_a if k in exact]
    paired_a = {p[0] for p in pairs}
    paired_b = {p[1] for p in pairs}
    only_a = [k for k in keys_a if k not in paired_a]
    only_b = [k for k in keys_b if k not in paired_b]
    fsdp_flat = {}
    for label, keys in ((label_a, keys_a), (label_b, keys_b)):
        flat = [k for k in keys if any(m in k.rsplit(".", 1)[-1] for m in FLAT_PARAM_MARKERS)]
        if flat:
            fsdp_flat[label] = flat[:20]
            notes.append(
                {
                    "side": label,
                    "prefix": "flat_param",
                    "cause": "FSDP flat parameters",
                    "explanation": (
                        f"{label} holds FSDP flat parameters ({len(flat)}): each is a flattened concatenation of "
                        "many original parameters (and only one rank's shard), so it cannot be matched per parameter"
                    ),
                    "fix": (
                        "save a full, unflattened state dict (FSDP StateDictType.FULL_STATE_DICT, or "
                        "torch.distributed.checkpoint.state_dict.get_model_state_dict) and compare that"
                    ),
                }
            )
    shape_mismatches = []
    dtype_mismatches = []
    for ka, kb in pairs:
        sa, da = meta_a[ka]
        sb, db = meta_b[kb]
        if list(sa) != list(sb):
            shape_mismatches.append({"a": ka, "b": kb, "shape_a": list(sa), "shape_b": list(sb)})
        if da != db:
            dtype_mismatches.append({"a": ka, "b": kb, "dtype_a": da, "dtype_b": db})
    return {
        "pairs": pairs,
        "only_in_a": only_a,
        "only_in_b": only_b,
        "prefix_notes": notes,
        "shape_mismatches": shape_mismatches,
        "dtype_mismatches": dtype_mismatches,
        "fsdp_flat": fsdp_flat,
    }
