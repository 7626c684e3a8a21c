"""`diff_checkpoints`: keys, shapes, dtypes, prefixes and values of two checkpoints, or of a
checkpoint against an entrypoint's model.

Two safetensors files are compared here with numpy (imported lazily; the server never imports
torch). Anything involving a `torch.save` file or a model runs `runners/checkpoint_runner.py` in
the user's interpreter, which loads with `torch.load(weights_only=True)` only: a pickle that would
run code is refused and never executed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.tools.distributed.errors import AnalysisError, from_runner_error
from trainsleuth.tools.runners import _ts_dist_ckpt as ck
from trainsleuth.tools.runners.launch import RunnerError, run_runner

MAX_ROWS = 500


class PrefixNote(BaseModel):
    side: str
    prefix: str
    cause: str
    explanation: str
    fix: str


class ValueDifference(BaseModel):
    a: str
    b: str
    max_abs_diff: float | str | None = None
    rel_diff: float | str | None = None
    norm_a: float | str | None = None
    norm_b: float | str | None = None


class StrictLoad(BaseModel):
    """What `model.load_state_dict(checkpoint, strict=False)` really restores: exact keys only."""

    restored: int = Field(description="tensors whose key and shape match: loaded")
    model_tensors: int
    missing: int = Field(description="model tensors the checkpoint lacks: they keep their initial values")
    unexpected: int = Field(description="checkpoint keys the model does not have: silently ignored")
    shape_errors: list[str] = Field(
        default_factory=list, description="same key, other shape: raises even with strict=False"
    )
    as_saved: int | None = Field(
        default=None,
        description="restored when the file's top-level mapping is passed as is (nested checkpoints)",
    )
    message: str = ""


class CheckpointDiff(BaseModel):
    a: str
    b: str
    kind_a: str
    kind_b: str
    container_a: str | None = Field(
        default=None, description="where the weights sit in a (nested, Lightning, HF folder)"
    )
    container_b: str | None = None
    strict_false: StrictLoad | None = None
    identical: bool = Field(
        description="same keys and no prefix to explain, same shapes, dtypes and values (within rtol/atol)"
    )
    n_tensors_a: int
    n_tensors_b: int
    matched: int
    only_in_a: list[str] = Field(default_factory=list)
    only_in_b: list[str] = Field(
        default_factory=list,
        description="with a model as b: the missing keys load_state_dict(strict=True) would report",
    )
    prefix_notes: list[PrefixNote] = Field(default_factory=list)
    shape_mismatches: list[dict[str, Any]] = Field(default_factory=list)
    dtype_mismatches: list[dict[str, Any]] = Field(default_factory=list)
    values_compared: int = 0
    values_identical: int = 0
    values_close: int = 0
    value_differences: list[ValueDifference] = Field(default_factory=list)
    n_value_differences: int = 0
    non_tensor_differences: dict[str, list[str | None]] = Field(default_factory=dict)
    rtol: float = 0.0
    atol: float = 0.0
    b_is_model: bool = False
    notes: list[str] = Field(default_factory=list)

    def render_text(self) -> str:
        head = "IDENTICAL" if self.identical else "DIFFERENT"
        lines = [
            f"diff_checkpoints: {head}: {self.a} ({self.kind_a}, {self.n_tensors_a} tensors) vs {self.b} "
            f"({self.kind_b}, {self.n_tensors_b} tensors); {self.matched} matched",
        ]
        for side, text in (("a", self.container_a), ("b", self.container_b)):
            if text:
                lines.append(f"{side}: {text}")
        if self.strict_false is not None:
            lines.append(f"strict=False: {self.strict_false.message}")
        for p in self.prefix_notes:
            lines.append(f"prefix: {p.explanation}. Fix: {p.fix}")
        if self.only_in_a:
            lines.append(f"only in a ({len(self.only_in_a)}): {', '.join(self.only_in_a[:15])}")
        if self.only_in_b:
            label = "missing from the checkpoint (only in the model)" if self.b_is_model else "only in b"
            lines.append(f"{label} ({len(self.only_in_b)}): {', '.join(self.only_in_b[:15])}")
        for m in self.shape_mismatches[:15]:
            lines.append(f"shape: {m['a']} {m['shape_a']} vs {m['b']} {m['shape_b']}")
        for m in self.dtype_mismatches[:15]:
            lines.append(f"dtype: {m['a']} {m['dtype_a']} vs {m['b']} {m['dtype_b']}")
        lines.append(
            f"values: {self.values_compared} compared, {self.values_identical} identical, {self.values_close} "
            f"within tolerance, {self.n_value_differences} different"
        )
        for v in self.value_differences[:15]:
            lines.append(f"  {v.a}: max|Δ| {v.max_abs_diff}, rel {v.rel_diff}")
        for k, (va, vb) in list(self.non_tensor_differences.items())[:10]:
            lines.append(f"non-tensor {k}: {va} vs {vb}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


# ---------------------------------------------------------------------------- numpy (safetensors)


def _np_array(path: Path, info: dict[str, Any], data_start: int) -> Any:
    import numpy as np

    begin, end = info["data_offsets"]
    raw = info["raw_dtype"]
    shape = tuple(info["shape"])
    count = end - begin
    if count == 0:
        return np.zeros(shape, dtype=np.float64)
    mm = np.memmap(path, dtype=np.uint8, mode="r", offset=data_start + begin, shape=(count,))
    if raw == "BF16":
        bits = mm.view(np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    simple = {
        "F64": np.float64,
        "F32": np.float32,
        "F16": np.float16,
        "I64": np.int64,
        "I32": np.int32,
        "I16": np.int16,
        "I8": np.int8,
        "U64": np.uint64,
        "U32": np.uint32,
        "U16": np.uint16,
        "U8": np.uint8,
        "BOOL": np.bool_,
    }
    if raw in simple:
        return mm.view(simple[raw]).reshape(shape)
    return mm  # float8 and others: raw bytes, compared for equality only


def _np_rel(a: Any, b: Any) -> tuple[float, float]:
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf, math.inf
    a = a.reshape(-1)
    b = b.reshape(-1)
    if a.size == 0:
        return 0.0, 0.0
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & np.isinf(b) & (a == b)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a - b)
    d[both_nan | same_inf] = 0.0
    d[np.isnan(d)] = math.inf
    max_abs = float(d.max())
    if max_abs == 0.0:
        return 0.0, 0.0
    ref = b[np.isfinite(b)]
    ref_norm = float(np.linalg.norm(ref)) if ref.size else 0.0
    diff_norm = float(np.linalg.norm(d)) if math.isfinite(max_abs) else math.inf
    return max_abs, (diff_norm / ref_norm if ref_norm > 0 else math.inf)


def _jsonable(x: float) -> float | str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _safetensors_files(path: Path) -> tuple[list[Path], str | None]:
    if path.is_dir():
        files, text = ck.hf_weight_files(str(path))
        return [Path(f) for f in files], text
    return [path], None


def _safetensors_side(
    path: Path,
) -> tuple[dict[str, tuple[Path, dict[str, Any], int]], dict[str, str], str | None]:
    """key -> (file, header entry, data start) over every shard; metadata; folder description."""
    files, text = _safetensors_files(path)
    entries: dict[str, tuple[Path, dict[str, Any], int]] = {}
    meta: dict[str, str] = {}
    for f in files:
        header, start, metadata = ck.read_safetensors_header(str(f))
        for k, info in header.items():
            entries[k] = (f, info, start)
        meta.update({f"__metadata__.{k}": str(v)[:80] for k, v in metadata.items()})
    return entries, meta, text


def _safetensors_payload(a: Path, b: Path, rtol: float, atol: float) -> dict[str, Any]:
    import numpy as np

    try:
        ha, meta_a, text_a = _safetensors_side(a)
        hb, meta_b, text_b = _safetensors_side(b)
    except ck.CheckpointError as exc:
        raise AnalysisError(exc.message, "pass a valid safetensors file or Hugging Face folder") from None
    ma = {k: (v[1]["shape"], v[1]["dtype"]) for k, v in ha.items()}
    mb = {k: (v[1]["shape"], v[1]["dtype"]) for k, v in hb.items()}
    match = ck.match_keys(ma, mb)
    rows = []
    identical = close = compared = 0
    for ka, kb in match["pairs"]:
        (fa, ia, sa), (fb, ib, sb) = ha[ka], hb[kb]
        if ia["shape"] != ib["shape"]:
            continue
        compared += 1
        xa = _np_array(fa, ia, sa)
        xb = _np_array(fb, ib, sb)
        if xa.dtype == np.uint8 and (ia["raw_dtype"] not in ("U8",) or ib["raw_dtype"] not in ("U8",)):
            same = ia["raw_dtype"] == ib["raw_dtype"] and bool(np.array_equal(xa, xb))
            max_abs, rel = (0.0, 0.0) if same else (math.inf, math.inf)
        else:
            max_abs, rel = _np_rel(xa, xb)
        if max_abs == 0.0:
            identical += 1
        elif max_abs <= atol or rel <= rtol:
            close += 1
        else:
            rows.append(
                {
                    "a": ka,
                    "b": kb,
                    "max_abs_diff": _jsonable(max_abs),
                    "rel_diff": _jsonable(rel),
                    "norm_a": _jsonable(float(np.linalg.norm(np.asarray(xa, dtype=np.float64)))),
                    "norm_b": _jsonable(float(np.linalg.norm(np.asarray(xb, dtype=np.float64)))),
                }
            )
    rows.sort(key=lambda r: -(r["rel_diff"] if isinstance(r["rel_diff"], float) else math.inf))
    return {
        "kind_a": "hf_folder" if text_a else "safetensors",
        "kind_b": "hf_folder" if text_b else "safetensors",
        "container_a": {"text": text_a, "path": []} if text_a else None,
        "container_b": {"text": text_b, "path": []} if text_b else None,
        "strict_false": ck.strict_false(ma, mb, "b"),
        "n_a": len(ma),
        "n_b": len(mb),
        "non_tensor_a": meta_a,
        "non_tensor_b": meta_b,
        "match": {k: v for k, v in match.items() if k != "pairs"},
        "n_pairs": len(match["pairs"]),
        "values": {
            "compared": compared,
            "identical": identical,
            "close": close,
            "different": len(rows),
            "rows": rows,
        },
    }


def strict_message(
    strict: dict[str, Any],
    prefix_notes: list[PrefixNote],
    container_path: list[str],
    matched_all: bool = False,
) -> str:
    """One sentence on what load_state_dict(strict=False) would restore, and why not more."""
    target = strict.get("target") or "the model"
    into = "of the model" if target == "the model" else "of a model shaped like b"
    source = (
        f"checkpoint[{']['.join(repr(p) for p in container_path)}]" if container_path else "the checkpoint"
    )
    text = f"load_state_dict({source}, strict=False) would restore {strict['restored']} of {strict['model_tensors']} tensors {into}"
    if strict.get("as_saved") is not None:
        text += f" (the file's top-level mapping as saved: {strict['as_saved']})"
    if strict["missing"]:
        examples = ", ".join(strict.get("missing_keys", [])[:3])
        text += f"; {strict['missing']} keep their initial values ({examples}{', ...' if strict['missing'] > 3 else ''})"
    if strict["unexpected"]:
        text += f"; {strict['unexpected']} checkpoint keys are ignored"
    if strict.get("shape_errors"):
        text += f"; {len(strict['shape_errors'])} shape mismatches raise even with strict=False"
    renames = [p for p in prefix_notes if p.prefix not in ("flat_param",)]
    if strict["missing"] and renames:
        fixes = "; ".join(f"{p.prefix!r} on {p.side}: {p.fix}" for p in renames)
        how = "only by prefix" if matched_all else "by prefix"
        text += f". The keys differ {how}, which strict=False does not fix: {fixes}"
    elif (
        strict["restored"] == strict["model_tensors"]
        and not strict["unexpected"]
        and not strict.get("shape_errors")
    ):
        text += ": everything"
    return text


# ---------------------------------------------------------------------------- entry point


def build_diff(
    payload: dict[str, Any], a: str, b: str, rtol: float, atol: float, model_side: bool
) -> CheckpointDiff:
    match = payload["match"]
    values = payload["values"]
    nta = payload.get("non_tensor_a") or {}
    ntb = payload.get("non_tensor_b") or {}
    non_tensor = {
        k: [nta.get(k), ntb.get(k)]
        for k in sorted(set(nta) | set(ntb))
        if nta.get(k) != ntb.get(k) and not model_side
    }
    out = CheckpointDiff(
        a=a,
        b=b,
        kind_a=payload["kind_a"],
        kind_b=payload["kind_b"],
        identical=False,
        n_tensors_a=payload["n_a"],
        n_tensors_b=payload["n_b"],
        matched=payload["n_pairs"],
        only_in_a=match["only_in_a"],
        only_in_b=match["only_in_b"],
        prefix_notes=[PrefixNote(**n) for n in match["prefix_notes"]],
        shape_mismatches=match["shape_mismatches"][:MAX_ROWS],
        dtype_mismatches=match["dtype_mismatches"][:MAX_ROWS],
        values_compared=values["compared"],
        values_identical=values["identical"],
        values_close=values["close"],
        value_differences=[ValueDifference(**r) for r in values["rows"][:MAX_ROWS]],
        n_value_differences=values["different"],
        non_tensor_differences=non_tensor,
        rtol=rtol,
        atol=atol,
        b_is_model=model_side,
    )
    strict = payload.get("strict_false")
    if strict:
        container = payload.get("container_a") or {}
        out.strict_false = StrictLoad(
            restored=strict["restored"],
            model_tensors=strict["model_tensors"],
            missing=strict["missing"],
            unexpected=strict["unexpected"],
            shape_errors=strict.get("shape_errors", []),
            as_saved=strict.get("as_saved"),
            message=strict_message(
                strict,
                out.prefix_notes,
                list(container.get("path") or []),
                matched_all=out.matched == out.n_tensors_b and not out.shape_mismatches,
            ),
        )
    for side, container in (("a", payload.get("container_a")), ("b", payload.get("container_b"))):
        if container and (container.get("path") or container.get("kind") != "flat state dict"):
            setattr(out, f"container_{side}", container.get("text"))
    out.identical = not (
        out.only_in_a
        or out.only_in_b
        or out.prefix_notes
        or out.shape_mismatches
        or out.dtype_mismatches
        or out.n_value_differences
        or non_tensor
    )
    if model_side:
        out.notes.append(
            "b is the entrypoint's model: only_in_a are the keys load_state_dict(strict=True) calls unexpected, "
            "only_in_b the keys it calls missing"
        )
    if out.n_value_differences > len(out.value_differences):
        out.notes.append(
            f"{out.n_value_differences} tensors differ; the {MAX_ROWS} largest relative differences are listed"
        )
    return out


def _all_safetensors(path: Path, kind: str) -> bool:
    if kind == "safetensors":
        return True
    if kind != "directory":
        return False
    try:
        files, _text = ck.hf_weight_files(str(path))
    except ck.CheckpointError as exc:
        raise AnalysisError(exc.message, "pass a model folder with its weights, or one weight file") from None
    return all(ck.sniff(f) == "safetensors" for f in files)


def diff_checkpoints(
    a: Path,
    b: Path | None,
    *,
    entrypoint: str | None = None,
    python: Callable[[], Path],
    cwd: Path,
    rtol: float = 0.0,
    atol: float = 0.0,
    timeout_s: float = 300.0,
    cancel_event: threading.Event | None = None,
) -> CheckpointDiff:
    """Compare `a` with `b`, or with the model of `entrypoint`. `python` resolves the user's
    interpreter only when torch is needed."""
    if (b is None) == (entrypoint is None):
        raise AnalysisError(
            "give exactly one of b (a second checkpoint) or entrypoint (a model)", "pass b or entrypoint"
        )
    for path in (a, b):
        if path is not None and not (path.is_file() or path.is_dir()):
            raise AnalysisError(
                f"{path} is not a file", "pass the path of a checkpoint file inside the workspace"
            )
    try:
        kind_a = ck.sniff(str(a))
        kind_b = ck.sniff(str(b)) if b is not None else "model"
    except ck.CheckpointError as exc:
        raise AnalysisError(exc.message, "check the path and its permissions") from None
    for path, kind in ((a, kind_a), (b, kind_b)):
        if kind == "unknown":
            raise AnalysisError(
                f"{path} is neither a torch.save file nor a safetensors file (unknown leading bytes)",
                "pass a torch.save state dict (.pt/.pth/.bin), a .safetensors file or a Hugging Face model folder",
            )
    b_label = str(b) if b is not None else f"model of {entrypoint}"
    if b is not None and _all_safetensors(a, kind_a) and _all_safetensors(b, kind_b):
        payload = _safetensors_payload(a, b, rtol, atol)
        return build_diff(payload, str(a), b_label, rtol, atol, model_side=False)
    args = ["--a", str(a), "--rtol", repr(rtol), "--atol", repr(atol), "--max-rows", str(MAX_ROWS)]
    args += ["--b", str(b)] if b is not None else ["--entrypoint", str(entrypoint)]
    try:
        outcome = run_runner(
            "checkpoint_runner.py",
            args,
            python=python(),
            cwd=cwd,
            timeout_s=timeout_s,
            cancel_event=cancel_event,
        )
    except RunnerError as exc:
        if exc.kind == "unsafe_pickle":
            raise AnalysisError(
                exc.message,
                "if you made this file yourself and trust it, re-save its state_dict with plain tensors "
                "(torch.save(model.state_dict())) or as safetensors; trainsleuth never loads untrusted pickles",
            ) from None
        if exc.kind in (
            "unreadable",
            "unsupported_format",
            "bad_safetensors",
            "unsupported_dtype",
            "unsafe_loader",
        ):
            raise AnalysisError(exc.message, "pass a torch.save state dict or a safetensors file") from None
        raise from_runner_error(exc, "diff_checkpoints") from None
    return build_diff(outcome.payload, str(a), b_label, rtol, atol, model_side=b is None)
