"""Real training logs, repeated to any size with their step numbers continued.

Each source is a real log kept in the repository (tests/data/realworld_logs, ../shared/realworld),
in one of the formats people have: four public logs (BLOOM, llm.c, modded-nanogpt, DeepSpeed-Chat)
and three written by real training code run for the corpus (HF Trainer, LightGBM, Ultralytics). A benchmark file is one source repeated: every repetition
shifts the source's step numbers past the last repetition's, so the series run on as one long
training run instead of restarting. Only the step numbers change; every other byte is the real
log's. What each format's step looks like is written here, independently of trainsleuth's readers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "realworld_logs"
SHARED = ROOT.parent / "shared" / "realworld"


@dataclass(frozen=True)
class Source:
    name: str  # the format, as the benchmark reports it
    files: tuple[Path, ...]  # concatenated, in this order, to make one repetition
    steps: tuple[str, ...]  # regexes whose group 2 is a step number to continue (group 1 is kept)
    csv_step_column: str | None = None  # CSV: the column holding the step (header written once)
    origin: str = ""


SOURCES = (
    Source(
        "megatron-deepspeed",
        tuple(
            SHARED / "bloom" / n
            for n in ("tr11-176B-ml.log", "tr8-104B-wide.log", "tr8b-104B.log", "tr1-13B-base.log")
        ),
        (r"(iteration\s+)(\d+)", r"(at iteration )(\d+)"),
        origin="BigScience BLOOM chronicles (Apache-2.0)",
    ),
    Source(
        "llm.c main.log",
        (CORPUS / "llmc" / "gpt2_124m_main_excerpt.log",),
        (r"(s:)(\d+)",),
        origin="KellerJordan/modded-nanogpt records/2024-10-13_llmc (MIT)",
    ),
    Source(
        "modded-nanogpt",
        (CORPUS / "modded_nanogpt" / "record_011625_sub3min_excerpt.txt",),
        (r"(step:)(\d+)",),
        origin="KellerJordan/modded-nanogpt records/011625_Sub3Min (MIT)",
    ),
    Source(
        "deepspeed",
        (CORPUS / "deepspeed_chat" / "opt1.3b_sft_excerpt.log",),
        (r"(\bstep=)(\d+)", r"(global_step=)(\d+)"),
        origin="microsoft/DeepSpeedExamples DeepSpeed-Chat training log (Apache-2.0)",
    ),
    Source(
        "hf-trainer stdout",
        (CORPUS / "hf_trainer_4x" / "gpt2_tiny_stdout.log",),
        (),  # its steps are tqdm positions: each repetition is a new progress bar
        origin="transformers 4.46 Trainer run (produced; see the corpus manifest)",
    ),
    Source(
        "lightgbm",
        (CORPUS / "lightgbm" / "digits_multiclass_stdout.log",),
        (r"^(\[)(\d+)",),
        origin="LightGBM train() run (produced; see the corpus manifest)",
    ),
    Source(
        "ultralytics results.csv",
        (CORPUS / "ultralytics" / "yolov8n_shapes_results.csv",),
        (),
        csv_step_column="epoch",
        origin="ultralytics YOLOv8 training run (produced; see the corpus manifest)",
    ),
)


def _repeat_text(src: Source, path: Path, size: int) -> int:
    text = "".join(f.open(encoding="utf-8", errors="surrogateescape", newline="").read() for f in src.files)
    patterns = [re.compile(p, re.M) for p in src.steps]
    top = max((int(m.group(2)) for p in patterns for m in p.finditer(text)), default=0)
    period = top + 1
    written = 0
    rep = 0
    with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as out:
        while written < size:
            chunk = text
            if rep:
                shift = rep * period
                for p in patterns:
                    chunk = p.sub(lambda m, shift=shift: m.group(1) + str(int(m.group(2)) + shift), chunk)
            out.write(chunk)
            written += len(chunk)
            rep += 1
    return written


def _repeat_csv(src: Source, path: Path, size: int) -> int:
    lines = src.files[0].read_text().splitlines()
    header, rows = lines[0], lines[1:]
    names = [h.strip() for h in header.split(",")]
    col = names.index(src.csv_step_column or "")
    cells = [r.split(",") for r in rows]
    period = max(int(float(c[col])) for c in cells) + 1
    written = 0
    rep = 0
    with open(path, "w") as out:
        out.write(header + "\n")
        while written < size:
            block = []
            for c in cells:
                c = list(c)
                width = len(c[col])
                c[col] = str(int(float(c[col])) + rep * period).rjust(width)
                block.append(",".join(c))
            chunk = "\n".join(block) + "\n"
            out.write(chunk)
            written += len(chunk)
            rep += 1
    return written


def mixed(path: Path, total: int, chunk: int = 1 << 20) -> int:
    """One text log of about `total` bytes: the text sources in turn, about `chunk` bytes of each
    at a time, every source's steps continuing where its last chunk stopped (a memory test: a
    log far larger than anything kept in memory)."""
    texts = []
    for src in SOURCES:
        if src.csv_step_column:
            continue
        text = "".join(
            f.open(encoding="utf-8", errors="surrogateescape", newline="").read() for f in src.files
        )
        patterns = [re.compile(p, re.M) for p in src.steps]
        top = max((int(m.group(2)) for p in patterns for m in p.finditer(text)), default=0)
        texts.append([text, patterns, top + 1, 0])
    written = 0
    with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as out:
        while written < total:
            for entry in texts:
                text, patterns, period, rep = entry
                size = 0
                while size < chunk:
                    piece = text
                    shift = rep * period
                    for p in patterns:
                        piece = p.sub(lambda m, shift=shift: m.group(1) + str(int(m.group(2)) + shift), piece)
                    out.write(piece)
                    size += len(piece)
                    rep += 1
                entry[3] = rep
                written += size
    return written


def build(folder: Path, total: int) -> dict[str, Path]:
    """One file per source, each about total / len(SOURCES) bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    each = total // len(SOURCES)
    out = {}
    for i, src in enumerate(SOURCES):
        path = (
            folder
            / f"{i}-{re.sub(r'[^a-z0-9]+', '-', src.name.lower())}{'.csv' if src.csv_step_column else '.log'}"
        )
        (_repeat_csv if src.csv_step_column else _repeat_text)(src, path, each)
        out[src.name] = path
    return out
