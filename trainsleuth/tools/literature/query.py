"""Turn an error message or a traceback into a search query.

Keeps: the exception type, its message, and framework/library names. Drops: file paths, memory
addresses, hex ids, numbers (shapes, sizes, line numbers, ranks), quoted user-specific names stay only
when short. A plain question (no error in it) is kept as written, only tidied.
"""

from __future__ import annotations

import re

FRAMEWORKS = [
    "pytorch",
    "torch",
    "cuda",
    "cudnn",
    "nccl",
    "gloo",
    "mpi",
    "triton",
    "torchrun",
    "deepspeed",
    "megatron",
    "fsdp",
    "ddp",
    "zero",
    "accelerate",
    "transformers",
    "peft",
    "trl",
    "lightning",
    "jax",
    "flax",
    "optax",
    "xla",
    "tensorflow",
    "keras",
    "numpy",
    "apex",
    "bitsandbytes",
    "xformers",
    "flash_attn",
    "vllm",
    "safetensors",
    "tokenizers",
    "datasets",
    "wandb",
    "tensorboard",
    "mlflow",
    "hydra",
    "ray",
    "horovod",
    "autocast",
    "gradscaler",
    "amp",
]

_EXC_LINE = re.compile(
    r"^\s*(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception|Warning|Interrupt|Exit|Failure|Timeout))\s*:\s*(.*)$"
)
_EXC_BARE = re.compile(r"^\s*(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception))\s*$")
_TRACE_NOISE = re.compile(r'^\s*(File "|Traceback \(most recent call last\)|\^+\s*$|~+\s*$|During handling)')
_PATH = re.compile(
    r"(?:[A-Za-z]:)?(?:[\\/][\w.\-@+~]+){2,}[\\/]?|(?:\.{1,2}/)[\w./\-]+|\b[\w\-]+\.(?:py|cpp|cu|h|so)\b"
)
_URL = re.compile(r"https?://\S+")
_ADDR = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{12,}\b|<[^<>]*\bat 0x[0-9a-fA-F]+>")
_NUM = re.compile(r"(?<![\w.])[-+]?\d[\d_.,:eE+\-]*(?:[KMGT]i?B|ms|s|%)?(?![A-Za-z_])")
_QUOTED_LONG = re.compile(r"'[^']{40,}'|\"[^\"]{40,}\"")
_PUNCT = re.compile(r"[()\[\]{}<>=|`;,]+")
_LOG_PREFIX = re.compile(r"^\s*(?:\[[^\]]{0,80}\]\s*)+")
_UNITS = re.compile(r"(?<![\w.])(?:[KMGT]i?B|B|ms|us|ns|s|sec|secs|bytes)(?![\w])")
_TRAILING = re.compile(r"(?:\s+\b(?:at|in|of|for|on|to|with|and|or|by)\b)+\s*$", re.IGNORECASE)
ACRONYMS = ("NCCL", "CUDA", "FSDP", "DDP", "XLA", "MPI", "AMP", "ZeRO", "cuDNN", "NaN")
MAX_QUERY_CHARS = 240


def looks_like_error(text: str) -> bool:
    return bool(
        "Traceback (most recent call last)" in text
        or any(_EXC_LINE.match(ln) for ln in text.splitlines())
        or (
            re.search(r"\b(error|exception|failed|timeout|timed out)\b", text, re.I)
            and ("\n" in text.strip() or _PATH.search(text) or _ADDR.search(text))
        )
    )


def _clean(text: str) -> str:
    gap = " \x00 "  # marks a removed token so a dangling "at"/"in" before it goes too
    text = _LOG_PREFIX.sub(" ", text)
    text = _URL.sub(gap, text)
    text = _ADDR.sub(gap, text)
    text = _PATH.sub(gap, text)
    text = _QUOTED_LONG.sub(gap, text)
    text = _NUM.sub(gap, text)
    text = re.sub(r"\b(?:at|in|from|of|on|to|for|by)\s*(?=\x00)", " ", text, flags=re.IGNORECASE)
    text = text.replace("\x00", " ")
    text = _PUNCT.sub(" ", text)
    text = _UNITS.sub(" ", text)
    text = re.sub(r"\s+[:.]\s+|\s+[:.]$", " ", text)
    text = re.sub(r"\s+", " ", text).strip(" :.-")
    return _TRAILING.sub("", text).strip(" :.-")


def _frameworks_in(text: str) -> list[str]:
    found: list[str] = []
    for name in ACRONYMS:  # acronyms also count inside identifiers (ProcessGroupNCCL)
        if name in text and name.lower() not in found:
            found.append(name.lower())
    low = text.lower()
    for name in FRAMEWORKS:
        if re.search(rf"(?<![a-z0-9_]){re.escape(name)}(?![a-z0-9_])", low) and name not in found:
            found.append(name)
    return found


def build_query(text: str) -> str:
    """A search query for `text` (a question, an error line, or a whole traceback)."""
    text = (text or "").strip()
    if not text:
        return ""
    if not looks_like_error(text):
        return re.sub(r"\s+", " ", text)[:MAX_QUERY_CHARS]

    lines = [ln for ln in text.splitlines() if ln.strip()]
    exc_type, message = "", ""
    for ln in reversed(lines):  # the last exception line is the one that was raised
        m = _EXC_LINE.match(ln)
        if m:
            exc_type, message = m.group(1), m.group(2)
            break
        b = _EXC_BARE.match(ln)
        if b:
            exc_type = b.group(1)
            break
    if not exc_type:
        content = [ln for ln in lines if not _TRACE_NOISE.match(ln)]
        message = content[-1] if content else lines[-1]
    cleaned = _clean(message)
    words = cleaned.split()
    if len(words) > 24:
        cleaned = _TRAILING.sub("", " ".join(words[:24]))
    parts = [exc_type, cleaned] if exc_type else [cleaned]
    query = " ".join(p for p in parts if p)
    low = query.lower()
    for fw in _frameworks_in(text):
        if fw not in low:
            query += f" {fw}"
    return query[:MAX_QUERY_CHARS].strip()
