"""Hugging Face `trainer_state.json`: the `log_history` list of the Trainer."""

from __future__ import annotations

import json
from pathlib import Path

from trainsleuth.tools.logs.source import MAX_JSON_FILE, LogFile, LogInputError, ReadContext
from trainsleuth.tools.logs.textparse import flatten, pick_step


def read_trainer_state(path: Path, ctx: ReadContext, size: int) -> None:
    with LogFile(path) as f:
        if f.size > MAX_JSON_FILE and not f.gzip:
            raise LogInputError(
                f"{path} is {f.size >> 20} MiB, too large for a trainer_state.json",
                "pass the console log or metrics file instead",
            )
        raw = f.read(MAX_JSON_FILE + 1)
    if len(raw) > MAX_JSON_FILE:
        raise LogInputError(
            f"{path} holds more than {MAX_JSON_FILE >> 20} MiB, too large for a trainer_state.json",
            "pass the console log or metrics file instead",
        )
    ctx.stats.bytes_read += len(raw)
    try:
        state = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise LogInputError(
            f"{path} is not valid JSON: {exc}", "check the file, or force format='jsonl'"
        ) from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise LogInputError(f"{path} has no log_history list", "pass a Hugging Face trainer_state.json")
    ctx.stats.lines += raw.count(b"\n")
    for entry in history:
        if isinstance(entry, dict):
            metrics = flatten(entry)
            step: float | None
            if ctx.step_key and ctx.step_key in metrics:
                step, source = metrics.pop(ctx.step_key), ctx.step_key
            else:
                step, source = pick_step(metrics)
            if metrics:
                ctx.collector.add(step, metrics, source=source)
