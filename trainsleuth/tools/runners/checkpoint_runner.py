"""Compare two checkpoints, or a checkpoint against an entrypoint's model (torch + stdlib only).

torch files are loaded only with `torch.load(weights_only=True)`: a pickle that would run code
(any global that is not a tensor type) is refused by torch's restricted unpickler and nothing of
it executes. safetensors files are parsed directly (header + raw bytes), never unpickled.
"""

import os

# Never let the environment turn safe loading off (torch honours these for implicit loads).
for _var in ("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_WEIGHTS_ONLY_LOAD"):
    os.environ.pop(_var, None)

import argparse  # noqa: E402
import sys  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import _ts_dist_ckpt as ck  # noqa: E402
import _ts_dist_common as common  # noqa: E402
import _ts_entrypoint as ep  # noqa: E402


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def flatten(obj, prefix, tensors, others, torch, depth=0):
    if isinstance(obj, torch.Tensor):
        tensors[prefix] = obj
        return
    if depth > 12:
        others[prefix] = type(obj).__name__
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), tensors, others, torch, depth + 1)
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, f"{prefix}.{i}" if prefix else str(i), tensors, others, torch, depth + 1)
        return
    text = repr(obj)
    others[prefix or "<root>"] = text if len(text) <= 80 else text[:77] + "..."


def load_torch_file(path, kind, torch):
    import inspect
    import pickle

    if "weights_only" not in inspect.signature(torch.load).parameters:
        raise ck.CheckpointError(
            "unsafe_loader",
            f"torch {torch.__version__} has no weights_only loading; refusing to unpickle {path} "
            "(upgrade torch to >= 1.13, or convert the file to safetensors where it was made)",
        )
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=kind == "torch_zip")
        except TypeError:  # older torch without mmap
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()
        reason = next(
            (line for line in first if "GLOBAL" in line or "Unsupported" in line), first[0] if first else ""
        )
        raise ck.CheckpointError(
            "unsafe_pickle",
            f"refused to load {path}: it contains pickled objects beyond tensors and containers, which "
            f"weights_only loading rejects ({reason.strip()[:300]}); nothing from the file was executed",
        ) from None
    except Exception as exc:
        text = str(exc)
        if "Weights only load failed" in text or "weights_only" in text:
            raise ck.CheckpointError(
                "unsafe_pickle",
                f"refused to load {path}: weights_only loading rejected it ({text.strip().splitlines()[0][:300]}); "
                "nothing from the file was executed",
            ) from None
        raise ck.CheckpointError(
            "unreadable", f"cannot load {path}: {type(exc).__name__}: {text[:500]}"
        ) from None


def load_safetensors_file(path, torch):
    header, data_start, metadata = ck.read_safetensors_header(path)
    tensors = {}
    with open(path, "rb") as fh:
        for name, info in header.items():
            begin, end = info["data_offsets"]
            fh.seek(data_start + begin)
            raw = bytearray(fh.read(end - begin))
            dtype = getattr(torch, info["dtype"], None)
            if dtype is None:
                raise ck.CheckpointError(
                    "unsupported_dtype", f"{path}: tensor {name!r} has dtype {info['dtype']}"
                )
            t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
            tensors[name] = t.reshape(info["shape"])
    return tensors, {f"__metadata__.{k}": str(v)[:80] for k, v in metadata.items()}


def tensor_candidates(obj, torch, path=(), depth=0, out=None):
    """Every mapping in the checkpoint that could be a state dict: [(path, [flattened tensor keys])]."""
    if out is None:
        out = []
    if isinstance(obj, dict) and obj:
        tensors: dict = {}
        others: dict = {}
        flatten(obj, "", tensors, others, torch)
        str_keys = all(isinstance(k, str) for k in obj)
        if tensors and str_keys and len(tensors) >= len(others):
            out.append((path, list(tensors)))
        if depth < 3:
            for k, v in obj.items():
                if isinstance(v, dict):
                    tensor_candidates(v, torch, (*path, str(k)), depth + 1, out)
    return out


def subtree(obj, path):
    for p in path:
        obj = obj[p] if p in obj else next(v for k, v in obj.items() if str(k) == p)
    return obj


def summarise_rest(obj, path, torch):
    """What the checkpoint holds beside the weights: top-level entries off the weights' path."""
    if not isinstance(obj, dict) or not path:
        return {}
    rest = {}
    for k, v in obj.items():
        if str(k) == path[0]:
            continue
        tensors: dict = {}
        others: dict = {}
        flatten(v, "", tensors, others, torch)
        if tensors:
            rest[str(k)] = f"{len(tensors)} tensors"
        else:
            text = repr(v)
            rest[str(k)] = text if len(text) <= 60 else text[:57] + "..."
    return rest


def read_side(path, torch):
    """The raw object of a checkpoint file or Hugging Face folder, and a description of its form."""
    kind = ck.sniff(path)
    if kind == "directory":
        files, text = ck.hf_weight_files(path)
        merged = {}
        for f in files:
            part = read_side(f, torch)["obj"]
            if not isinstance(part, dict):
                raise ck.CheckpointError("unsupported_format", f"{f} does not hold a state dict")
            merged.update(part)
        return {"kind": "hf_folder", "obj": merged, "container": text}
    if kind == "safetensors":
        tensors, others = load_safetensors_file(path, torch)
        return {"kind": "safetensors", "obj": tensors, "others": others, "container": None}
    if kind in ("torch_zip", "pickle"):
        return {"kind": "torch", "obj": load_torch_file(path, kind, torch), "container": None}
    raise ck.CheckpointError(
        "unsupported_format",
        f"{path} is neither a torch.save file, a safetensors file nor a Hugging Face model folder",
    )


def weights_of(side, torch, reference_keys=None):
    """Locate the state dict inside the side's object, flatten it, and describe the rest."""
    obj = side["obj"]
    path = ck.pick_state_dict(tensor_candidates(obj, torch), reference_keys)
    tensors: dict = {}
    others = dict(side.get("others") or {})
    flatten(subtree(obj, path) if path else obj, "", tensors, others, torch)
    rest = summarise_rest(obj, path, torch)
    others.update(rest)
    top = [str(k) for k in obj] if isinstance(obj, dict) else []
    container = ck.describe_container(top, path, rest)
    if side.get("container"):
        container.update({"kind": "Hugging Face folder", "text": side["container"]})
    top_level = {}
    if isinstance(obj, dict):
        top_level = {
            str(k): (list(v.shape), _dtype_name(v)) if isinstance(v, torch.Tensor) else ([], type(v).__name__)
            for k, v in obj.items()
        }
    return {
        "kind": side["kind"],
        "tensors": tensors,
        "others": others,
        "container": container,
        "top_level": top_level,
    }


def value_diffs(pairs, ta, tb, rtol, atol, torch):
    rows = []
    identical = close = 0
    compared = 0
    for ka, kb in pairs:
        a, b = ta[ka], tb[kb]
        if list(a.shape) != list(b.shape):
            continue
        compared += 1
        try:
            a64 = a.detach().to("cpu").float().double() if a.dtype != torch.float64 else a.detach().cpu()
            b64 = b.detach().to("cpu").float().double() if b.dtype != torch.float64 else b.detach().cpu()
        except Exception:
            a64 = a.detach().cpu().to(torch.float64)
            b64 = b.detach().cpu().to(torch.float64)
        max_abs, rel = common.rel_error(a64, b64)
        if max_abs == 0:
            identical += 1
            continue
        if max_abs <= atol or rel <= rtol:
            close += 1
            continue
        rows.append(
            {
                "a": ka,
                "b": kb,
                "max_abs_diff": common.jsonable(max_abs),
                "rel_diff": common.jsonable(rel),
                "norm_a": common.jsonable(a64.norm()),
                "norm_b": common.jsonable(b64.norm()),
            }
        )
    rows.sort(key=lambda r: -(r["rel_diff"] if isinstance(r["rel_diff"], float) else float("inf")))
    return {
        "compared": compared,
        "identical": identical,
        "close": close,
        "different": len(rows),
        "rows": rows,
    }


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--result", required=True)
    parser.add_argument("--a", required=True)
    parser.add_argument("--b")
    parser.add_argument("--entrypoint")
    parser.add_argument("--rtol", type=float, default=0.0)
    parser.add_argument("--atol", type=float, default=0.0)
    parser.add_argument("--max-rows", type=int, default=500)
    args = parser.parse_args(argv)
    try:
        import torch

        raw_a = read_side(args.a, torch)
        side_b: dict
        if args.entrypoint:
            contract = ep.load_contract(args.entrypoint, os.getcwd())
            sd = contract["model"].state_dict()
            side_b = {"kind": "model", "tensors": dict(sd.items()), "others": {}, "container": None}
            side_a = weights_of(raw_a, torch, list(side_b["tensors"]))
        else:
            raw_b = read_side(args.b, torch)
            side_b = weights_of(raw_b, torch)
            side_a = weights_of(raw_a, torch, list(side_b["tensors"]))
            side_b = weights_of(raw_b, torch, list(side_a["tensors"]))
        meta_a = {k: (list(t.shape), _dtype_name(t)) for k, t in side_a["tensors"].items()}
        meta_b = {k: (list(t.shape), _dtype_name(t)) for k, t in side_b["tensors"].items()}
        match = ck.match_keys(meta_a, meta_b)
        values = value_diffs(
            match["pairs"], side_a["tensors"], side_b["tensors"], args.rtol, args.atol, torch
        )
        values["rows"] = values["rows"][: args.max_rows]
        strict = ck.strict_false(meta_a, meta_b, "the model" if args.entrypoint else "b")
        if side_a["container"]["path"]:
            as_saved = {k: v for k, v in side_a["top_level"].items()}
            strict["as_saved"] = ck.strict_false(as_saved, meta_b)["restored"]
        payload = {
            "ok": True,
            "container_a": side_a["container"],
            "container_b": side_b.get("container"),
            "strict_false": strict,
            "kind_a": side_a["kind"],
            "kind_b": side_b["kind"],
            "n_a": len(meta_a),
            "n_b": len(meta_b),
            "meta_a": meta_a,
            "meta_b": meta_b,
            "non_tensor_a": side_a["others"],
            "non_tensor_b": side_b["others"],
            "match": {k: v for k, v in match.items() if k != "pairs"},
            "n_pairs": len(match["pairs"]),
            "values": values,
        }
    except ck.CheckpointError as exc:
        payload = {"ok": False, "error": {"kind": exc.kind, "message": exc.message}}
    except ep.EntrypointError as exc:
        payload = {"ok": False, "error": exc.to_json()}
    except Exception as exc:
        payload = ep.unexpected_failure(exc)
    ep.write_result(args.result, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
