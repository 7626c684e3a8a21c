"""PyTorch Flight Recorder dumps, read and matched across ranks the way `torchfrtrace`
(`torch.distributed.flight_recorder`) does, without torch.

A dump is one file per rank (`<prefix><rank>`): a pickle of plain containers (the default,
`_dump_fr_trace()`, what `TORCH_FR_DUMP_TEMP_FILE` writes) or its JSON form
(`_dump_fr_trace_json()`). Pickles are read with an unpickler that refuses every global, so a
file cannot run code. Entries carry `collective_seq_id` per process group, `profiling_name`
(`gloo:all_reduce`, `nccl:all_gather`), `input_sizes` / `output_sizes`, dtypes, `state`, `retired`
and the Python `frames` of the call.

Matching: per process group, collective sequence numbers are paired across the ranks in it; the
first sequence number where some rank never entered the collective, or ranks entered different
ones (type, sizes, dtypes), is the problem, as in torchfrtrace's `build_collectives`.
Two things differ from torchfrtrace on purpose: gloo dumps of torch 2.13 list no usable
`pg_config` (torchfrtrace stops with a KeyError on them), so group members come from the
default group's world or from the ranks that recorded the group; and gloo never marks entries
`completed`, so completion is read from `retired` and `pg_status`.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.findings import Finding

MAX_DUMP_BYTES = 256 * 1024 * 1024
MAX_RANKS = 4096
CHECK_GROUP = "trainsleuth_check"
RUNNER_MARK = "trainsleuth/tools/runners/"
OBSERVER_MARK = "trainsleuth/tools/runners/_ts_observe"  # the observer's wrappers: transparent, not a check
NAME_RANK = re.compile(r"^(.*?)(\d+)$")


class FRCall(BaseModel):
    """One rank's record of one collective."""

    rank: int
    op: str
    input_sizes: list[Any] = Field(default_factory=list)
    output_sizes: list[Any] = Field(default_factory=list)
    dtypes: list[str] = Field(default_factory=list)
    state: str = Field(description="completed or pending")
    call_site: str | None = None


class FRProblem(BaseModel):
    kind: str = Field(
        description="missing_ranks, type_mismatch, size_mismatch, dtype_mismatch or not_completed"
    )
    group: str
    seq: int = Field(description="the collective's sequence number in its process group")
    op: str
    calls: list[FRCall] = Field(default_factory=list, description="the ranks that entered it")
    missing_ranks: list[int] = Field(default_factory=list)
    elsewhere: dict[str, str] = Field(
        default_factory=dict, description="missing rank -> its last collective in this group"
    )
    message: str


class FlightRecorderReport(BaseModel):
    version: str | None = None
    ranks: list[int] = Field(default_factory=list, description="ranks whose dump was read")
    expected_ranks: list[int] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    matched: int = Field(default=0, description="collectives every member entered alike")
    problem: FRProblem | None = None
    last_by_rank: dict[str, str] = Field(
        default_factory=dict, description="rank -> its last recorded collective"
    )
    notes: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------- reading


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"refusing {module}.{name}: a Flight Recorder dump holds only containers"
        )


def load_dump(path: Path) -> dict[str, Any]:
    """One rank's dump (pickle or JSON) as plain dicts; AnalysisError when it is not one."""
    try:
        size = path.stat().st_size
        if size > MAX_DUMP_BYTES:
            raise AnalysisError(f"{path} is {size} bytes: too large for a Flight Recorder dump", None)
        data = path.read_bytes()
    except OSError as exc:
        raise AnalysisError(f"cannot read {path}: {exc}", "check the path") from None
    try:
        if data[:1] in (b"{", b"["):
            obj = json.loads(data.decode("utf-8"))
        else:
            obj = _NoGlobals(io.BytesIO(data)).load()
    except Exception as exc:
        raise AnalysisError(
            f"{path} is not a Flight Recorder dump ({type(exc).__name__}: {str(exc)[:200]})",
            "pass the files written by TORCH_FR_DUMP_TEMP_FILE or _dump_fr_trace(), one per rank",
        ) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("entries", []), list) or "version" not in obj:
        raise AnalysisError(
            f"{path} is not a Flight Recorder dump (no 'version' / 'entries')",
            "pass the files written by TORCH_FR_DUMP_TEMP_FILE or _dump_fr_trace(), one per rank",
        )
    return obj


def dump_files(path: Path) -> dict[int, Path]:
    """rank -> file, from a folder of dumps or from one dump (its siblings sharing the prefix)."""
    if path.is_dir():
        candidates = [p for p in sorted(path.iterdir()) if p.is_file() and NAME_RANK.match(p.name)]
        prefixes: dict[str, list[Path]] = {}
        for p in candidates:
            m = NAME_RANK.match(p.name)
            assert m is not None
            prefixes.setdefault(m.group(1), []).append(p)
        if not prefixes:
            raise AnalysisError(
                f"no Flight Recorder dump in {path} (files are named <prefix><rank>)",
                "point at the folder TORCH_FR_DUMP_TEMP_FILE writes to, or at one rank's file",
            )
        # the prefix with most files (torchfrtrace refuses ambiguous folders; a stray file should not stop us)
        prefix, files = max(prefixes.items(), key=lambda kv: len(kv[1]))
    else:
        m = NAME_RANK.match(path.name)
        if not m:
            raise AnalysisError(
                f"{path.name} does not end with a rank number (dumps are named <prefix><rank>)",
                "pass the folder of dumps or one rank's file",
            )
        prefix = m.group(1)
        files = [p for p in sorted(path.parent.iterdir()) if p.is_file() and _has_prefix(p.name, prefix)]
    out: dict[int, Path] = {}
    for p in files[:MAX_RANKS]:
        m = NAME_RANK.match(p.name)
        if m and m.group(1) == prefix:
            out[int(m.group(2))] = p
    return out


def _has_prefix(name: str, prefix: str) -> bool:
    m = NAME_RANK.match(name)
    return bool(m and m.group(1) == prefix)


def read_dumps(path: Path) -> dict[int, dict[str, Any]]:
    return {rank: load_dump(p) for rank, p in sorted(dump_files(path).items())}


# ---------------------------------------------------------------------------- matching


def op_name(entry: dict[str, Any]) -> str:
    name = str(entry.get("profiling_name") or "?")
    return name.split(":", 1)[1] if ":" in name else name


def call_site(frames: list[dict[str, Any]] | None) -> str | None:
    """The innermost frame outside torch and the standard library: where the user called it."""
    for fr in frames or []:
        file = str(fr.get("filename") or "").replace("\\", "/")
        if OBSERVER_MARK in file:
            continue
        if RUNNER_MARK in file:
            return "trainsleuth's own check (between steps)"
        if "/torch/" in file or "/lib/python3" in file or file.startswith("<"):
            continue
        return f"{fr.get('name')} ({Path(file).name}:{fr.get('line')})"
    return None


def _group_label(entry: dict[str, Any]) -> str:
    pg = entry.get("process_group") or ["?", ""]
    name, desc = str(pg[0]), str(pg[1]) if len(pg) > 1 else ""
    return desc if desc and desc != "undefined" else f"pg {name}"


def _completed(entry: dict[str, Any], dump: dict[str, Any]) -> bool:
    if entry.get("state") == "completed" or entry.get("retired") is True:
        return True
    status = (dump.get("pg_status") or {}).get(str(entry.get("pg_id")), {})
    try:
        return int(entry.get("collective_seq_id") or 0) <= int(status.get("last_completed_collective", -1))
    except (TypeError, ValueError):
        return False


def _call(rank: int, entry: dict[str, Any], dump: dict[str, Any]) -> FRCall:
    dtypes = [str(x) for x in (entry.get("input_dtypes") or [])]
    return FRCall(
        rank=rank,
        op=op_name(entry),
        input_sizes=list(entry.get("input_sizes") or []),
        output_sizes=list(entry.get("output_sizes") or []),
        dtypes=dtypes,
        state="completed" if _completed(entry, dump) else "pending",
        call_site=call_site(entry.get("frames")),
    )


def _describe(entry: dict[str, Any], dump: dict[str, Any]) -> str:
    c = _call(-1, entry, dump)
    site = f" at {c.call_site}" if c.call_site else ""
    return (
        f"#{entry.get('collective_seq_id')} {c.op} {c.input_sizes} ({c.state}) in {_group_label(entry)}{site}"
    )


def _members(
    label: str, pg_name: str, dumps: dict[int, dict[str, Any]], recorded: set[int], world: int | None
) -> tuple[set[int], str | None]:
    for dump in dumps.values():
        cfg = (dump.get("pg_config") or {}).get(pg_name)
        if isinstance(cfg, dict):
            try:
                ranks = json.loads(str(cfg.get("ranks", "[]")))
            except ValueError:
                ranks = []
            if ranks:
                return {int(r) for r in ranks}, None
    if label in ("default_pg", CHECK_GROUP):
        size = world or (max(dumps) + 1 if dumps else 0)
        return set(range(size)), None
    return set(
        recorded
    ), f"members of {label} are not listed in the dumps; taken as the ranks that recorded it"


def _sizes_differ(op: str, a: FRCall, b: FRCall) -> bool:
    if op not in ("all_to_all", "scatter") and a.input_sizes != b.input_sizes:
        return True
    return op not in ("all_to_all", "gather") and a.output_sizes != b.output_sizes


def analyse(dumps: dict[int, dict[str, Any]], world_size: int | None = None) -> FlightRecorderReport:
    """Pair every process group's collectives across ranks and name the first that did not match."""
    report = FlightRecorderReport(ranks=sorted(dumps))
    versions = {str(d.get("version")) for d in dumps.values()}
    report.version = ", ".join(sorted(versions)) or None
    if len(versions) > 1:
        report.notes.append(f"the ranks' dumps have different format versions: {sorted(versions)}")
    # (pg name, label) -> rank -> seq -> [entries]
    groups: dict[tuple[str, str], dict[int, dict[int, list[dict[str, Any]]]]] = {}
    last: dict[int, dict[str, Any]] = {}
    p2p = 0
    for rank, dump in dumps.items():
        for entry in dump.get("entries") or []:
            if not isinstance(entry, dict):
                continue
            if last.get(rank) is None or int(entry.get("record_id") or 0) >= int(
                last[rank].get("record_id") or 0
            ):
                last[rank] = entry
            if entry.get("is_p2p"):
                p2p += 1
                continue
            pg = entry.get("process_group") or ["?", ""]
            key = (str(pg[0]), _group_label(entry))
            seq = int(entry.get("collective_seq_id") or 0)
            groups.setdefault(key, {}).setdefault(rank, {}).setdefault(seq, []).append(entry)
    for rank, entry in sorted(last.items()):
        report.last_by_rank[str(rank)] = _describe(entry, dumps[rank])
    if p2p:
        report.notes.append(f"{p2p} point-to-point records (send/recv) are listed but not paired")
    report.groups = sorted({label for _name, label in groups})
    expected_all: set[int] = set()
    problems: list[tuple[int, FRProblem]] = []
    for (pg_name, label), by_rank in groups.items():
        members, note = _members(label, pg_name, dumps, set(by_rank), world_size)
        if note:
            report.notes.append(note)
        expected_all |= members
        dumped = members & set(dumps)
        if members - set(dumps):
            report.notes.append(f"no dump from rank(s) {sorted(members - set(dumps))} of {label}")
        # the ring buffer may have dropped old records: start where every rank still has them
        starts = [min(seqs) for seqs in by_rank.values() if seqs]
        start = max(starts) if starts else 0
        seqs = sorted({s for seqs in by_rank.values() for s in seqs if s >= start})
        for seq in seqs:
            calls = {r: by_rank[r][seq] for r in dumped if seq in by_rank.get(r, {})}
            if not calls:
                continue
            first_rank = min(calls)
            first = calls[first_rank][-1]
            op = op_name(first)
            entered = [_call(r, calls[r][-1], dumps[r]) for r in sorted(calls)]
            missing = sorted(r for r in dumped if r not in calls)
            created = min(int(es[-1].get("time_created_ns") or 0) for es in calls.values())
            problem = _problem(label, seq, op, entered, missing, by_rank, dumps)
            if problem is not None:
                problems.append((created, problem))
                break
            report.matched += 1
    report.expected_ranks = sorted(expected_all or set(dumps))
    if problems:
        # the user's groups before the check's own; the earliest first
        problems.sort(key=lambda cp: (cp[1].group.startswith("trainsleuth_"), cp[0]))
        report.problem = problems[0][1]
    return report


def _problem(
    label: str,
    seq: int,
    op: str,
    entered: list[FRCall],
    missing: list[int],
    by_rank: dict[int, dict[int, list[dict[str, Any]]]],
    dumps: dict[int, dict[str, Any]],
) -> FRProblem | None:
    who = _ranks_text([c.rank for c in entered])
    site = next((c.call_site for c in entered if c.call_site), None)
    at = f" (called at {site})" if site else ""
    if missing:
        elsewhere: dict[str, str] = {}
        for r in missing:
            before = [s for s in by_rank.get(r, {}) if s < seq]
            if before:
                elsewhere[str(r)] = _describe(by_rank[r][max(before)][-1], dumps[r])
            else:
                elsewhere[str(r)] = f"no earlier collective in {label}"
        detail = "; ".join(f"rank {r}'s last there: {text}" for r, text in elsewhere.items())
        return FRProblem(
            kind="missing_ranks",
            group=label,
            seq=seq,
            op=op,
            calls=entered,
            missing_ranks=missing,
            elsewhere=elsewhere,
            message=(
                f"{_ranks_text(missing)} never entered {op} #{seq} of {label} "
                f"(input sizes {entered[0].input_sizes}) that {who} {'wait' if len(entered) > 1 else 'waits'} in{at}; "
                + detail
            ),
        )
    ops = {c.op for c in entered}
    if len(ops) > 1:
        parts = ", ".join(
            f"rank {c.rank} calls {c.op}" + (f" at {c.call_site}" if c.call_site else "") for c in entered
        )
        return FRProblem(
            kind="type_mismatch",
            group=label,
            seq=seq,
            op=op,
            calls=entered,
            message=f"collective #{seq} of {label} differs across ranks: {parts}",
        )
    ref = entered[0]
    odd = [c for c in entered[1:] if _sizes_differ(op, ref, c)]
    if odd:
        parts = ", ".join(f"rank {c.rank} input {c.input_sizes} output {c.output_sizes}" for c in [ref, *odd])
        return FRProblem(
            kind="size_mismatch",
            group=label,
            seq=seq,
            op=op,
            calls=entered,
            message=f"{op} #{seq} of {label}{at} has different sizes across ranks: {parts}",
        )
    if any(set(c.dtypes) != set(ref.dtypes) for c in entered[1:]):
        parts = ", ".join(f"rank {c.rank} {c.dtypes}" for c in entered)
        return FRProblem(
            kind="dtype_mismatch",
            group=label,
            seq=seq,
            op=op,
            calls=entered,
            message=f"{op} #{seq} of {label}{at} has different dtypes across ranks: {parts}",
        )
    if any(c.state != "completed" for c in entered):
        pending = [c.rank for c in entered if c.state != "completed"]
        return FRProblem(
            kind="not_completed",
            group=label,
            seq=seq,
            op=op,
            calls=entered,
            message=(
                f"every rank entered {op} #{seq} of {label}{at} alike, but it never completed on "
                f"{_ranks_text(pending)}: a peer died or the transport is stuck"
            ),
        )
    return None


def _ranks_text(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) != 1 else ''} {', '.join(str(r) for r in ranks)}"


def finding(report: FlightRecorderReport) -> Finding | None:
    """collective_mismatch from the records, when they show one."""
    p = report.problem
    if p is None or p.kind == "not_completed":
        return None
    by_rank: dict[str, Any] = {
        str(c.rank): {
            "collective": c.op,
            "input_sizes": c.input_sizes,
            "output_sizes": c.output_sizes,
            "state": c.state,
            "call_site": c.call_site,
        }
        for c in p.calls
    }
    for r in p.missing_ranks:
        by_rank[str(r)] = {"collective": None, "last": p.elsewhere.get(str(r))}
    return Finding(
        code="collective_mismatch",
        severity="error",
        message=f"Flight Recorder: {p.message} (make every rank call the same collectives, in the same order, "
        "with the same shapes)",
        evidence={
            "source": "flight_recorder",
            "kind": p.kind,
            "group": p.group,
            "seq": p.seq,
            "collective": p.op,
            "missing_ranks": p.missing_ranks,
            "by_rank": by_rank,
        },
        failure_modes=failure_modes_for("collective_mismatch"),
    )
