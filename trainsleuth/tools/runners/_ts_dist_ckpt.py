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
    """'safetensors', 'torch_zip', 'pickle', 'directory' or 'unknown' from the first bytes."""
    if os.path.isdir(path):
        return "directory"
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
                            f"every key of {label} sits under {prefix!r}: the network kept as the attribute "
                            f"{prefix[:-1]!r} of a wrapper (a LightningModule, an EMA or task wrapper)"
                        ),
                        "fix": (
                            f"strip {prefix!r} from the keys before load_state_dict, or load into the wrapper's "
                            f".{prefix[:-1]}"
                        ),
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


# ---------------------------------------------------------------------------- nested checkpoints

# Where training code puts the model's weights inside a checkpoint, most likely first.
STATE_DICT_NAMES = (
    "state_dict",
    "model_state_dict",
    "model",
    "module",
    "net",
    "network",
    "model_state",
    "weights",
    "params",
    "ema",
    "model_ema",
    "ema_state_dict",
)
NOT_MODEL = ("optimizer", "optim", "opt", "scheduler", "lr_scheduler", "scaler", "grad_scaler", "amp", "rng")


def describe_container(top_keys, path, other):
    """A short sentence on what the checkpoint holds besides the weights."""
    if "pytorch-lightning_version" in top_keys or (
        "state_dict" in top_keys and ("optimizer_states" in top_keys or "lr_schedulers" in top_keys)
    ):
        kind = "Lightning checkpoint"
    elif path:
        kind = "nested checkpoint"
    else:
        kind = "flat state dict"
    where = f"weights at [{']['.join(repr(p) for p in path)}]" if path else "weights at the top level"
    extra = ", ".join(f"{k}: {v}" for k, v in list(other.items())[:8])
    return {
        "kind": kind,
        "path": list(path),
        "text": f"{kind}, {where}" + (f"; also {extra}" if extra else ""),
    }


def pick_state_dict(candidates, reference_keys=None):
    """The candidate (path, keys) that holds the model's weights.

    `candidates`: [(path tuple, [flattened tensor keys])]. With `reference_keys` (the other side's
    keys) the candidate whose keys match most of them wins; else a known name, else the largest."""
    usable = [c for c in candidates if not any(str(p).lower() in NOT_MODEL for p in c[0])]
    if not usable:
        usable = candidates
    if not usable:
        return ()

    def name_rank(path):
        if not path:
            return len(STATE_DICT_NAMES) + 1  # the top level: only when nothing inside is named like weights
        last = str(path[-1]).lower()
        return STATE_DICT_NAMES.index(last) if last in STATE_DICT_NAMES else len(STATE_DICT_NAMES)

    if reference_keys:
        ref: dict = {k: ([], "") for k in reference_keys}
        scored = []
        for path, keys in usable:
            pairs = len(match_keys({k: ([], "") for k in keys}, ref)["pairs"])
            scored.append((pairs, -name_rank(path), len(keys), path))
        best = max(scored, key=lambda s: (s[0], s[1], s[2]))
        if best[0] > 0:
            return best[3]
    ranked = sorted(usable, key=lambda c: (name_rank(c[0]), -len(c[1])))
    best_path = ranked[0][0]
    if best_path and name_rank(best_path) == len(STATE_DICT_NAMES):
        root = next((c for c in usable if not c[0]), None)
        if root is not None:  # no known name inside: the top level, unless it is mostly one child
            return ()
    return best_path


def strict_false(ckpt, model, label="the model"):
    """What `model.load_state_dict(ckpt, strict=False)` really does, key by key (no renaming).

    `ckpt` and `model` map key -> (shape, dtype). Shapes that differ raise even with strict=False."""
    restored = [k for k in model if k in ckpt and list(ckpt[k][0]) == list(model[k][0])]
    shape_errors = [k for k in model if k in ckpt and list(ckpt[k][0]) != list(model[k][0])]
    missing = [k for k in model if k not in ckpt]
    unexpected = [k for k in ckpt if k not in model]
    return {
        "restored": len(restored),
        "model_tensors": len(model),
        "missing": len(missing),
        "unexpected": len(unexpected),
        "shape_errors": shape_errors[:50],
        "missing_keys": missing[:20],
        "unexpected_keys": unexpected[:20],
        "target": label,
    }


# ---------------------------------------------------------------------------- Hugging Face folders


def hf_weight_files(folder):
    """(weight files, description) of a Hugging Face model folder: sharded (an index JSON naming the
    shards) or single-file, safetensors preferred over pytorch_model.bin as transformers does."""
    try:
        names = set(os.listdir(folder))
    except OSError as exc:
        raise CheckpointError("unreadable", f"cannot list {folder}: {exc}") from None
    model_type = None
    if "config.json" in names:
        try:
            with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
                model_type = json.load(fh).get("model_type")
        except (OSError, ValueError, AttributeError):
            model_type = None
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if index in names:
            try:
                with open(os.path.join(folder, index), encoding="utf-8") as fh:
                    weight_map = json.load(fh)["weight_map"]
                files = sorted(set(weight_map.values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                raise CheckpointError(
                    "unsupported_format", f"{folder}/{index} is not a valid shard index"
                ) from None
            missing = [f for f in files if f not in names]
            if missing:
                raise CheckpointError(
                    "unsupported_format",
                    f"{folder}/{index} names shard files that are missing: {missing[:5]}",
                )
            return [os.path.join(folder, f) for f in files], _hf_text(len(files), model_type)
    for single in (
        "model.safetensors",
        "pytorch_model.bin",
        "adapter_model.safetensors",
        "adapter_model.bin",
    ):
        if single in names:
            return [os.path.join(folder, single)], _hf_text(1, model_type)
    loose = sorted(n for n in names if n.endswith((".safetensors", ".bin", ".pt", ".pth")))
    if len(loose) == 1:
        return [os.path.join(folder, loose[0])], _hf_text(1, model_type)
    raise CheckpointError(
        "unsupported_format",
        f"{folder} is a folder without model weights transformers would load (model.safetensors, "
        "pytorch_model.bin, or a *.index.json with its shards)"
        + (f"; it holds {len(loose)} weight files: pass one of them" if loose else ""),
    )


def _hf_text(n_files, model_type):
    kind = f"Hugging Face folder ({n_files} weight file{'s' if n_files != 1 else ''}"
    return kind + (f", model_type {model_type})" if model_type else ")")
