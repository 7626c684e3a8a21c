"""Flight Recorder dumps: matched across ranks like torchfrtrace, read without running code.

The NCCL-format dumps here are built to the format torch 2.13 writes (version "2.10": pg_config
keyed by process-group name, states scheduled/started/completed). torchfrtrace itself (the
`torch.distributed.flight_recorder` module of the installed torch) reads them and must reach the same
verdict, which is what makes them format-faithful. Real gloo dumps of a hung job are made in
test_distributed_check.py and test_distributed_stacks.py.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.distributed import flight
from trainsleuth.tools.distributed.errors import AnalysisError

TORCH_FILE = "/site-packages/torch/distributed/distributed_c10d.py"


def _entry(
    rank: int, seq: int, op: str, sizes: list[list[int]], state: str, line: int, **extra: Any
) -> dict[str, Any]:
    out_sizes = [[sizes[0][0] * 4]] if op == "all_gather" else sizes
    entry = {
        "record_id": seq - 1,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"nccl:{op}",
        "time_created_ns": 1_000_000 * seq + rank,
        "duration_ms": 1.0,
        "input_sizes": sizes,
        "input_dtypes": ["Float"],
        "output_sizes": out_sizes,
        "output_dtypes": ["Float"],
        "state": state,
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": [
            {"name": op, "filename": "/env" + TORCH_FILE, "line": 3000},
            {"name": "train_step", "filename": "/job/train.py", "line": line},
        ],
    }
    entry.update(extra)
    return entry


def _dump(entries: list[dict[str, Any]], world: int = 4) -> dict[str, Any]:
    return {
        "version": "2.10",
        "comm_lib_version": "2.21.5",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {
            "0": {"last_enqueued_collective": 0, "last_started_collective": 0, "last_completed_collective": 0}
        },
        "entries": entries,
    }


def _write(folder: Path, dumps: dict[int, dict[str, Any]], prefix: str = "nccl_trace_rank_") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, dump in dumps.items():
        (folder / f"{prefix}{rank}").write_bytes(pickle.dumps(dump))
    return folder


def _rank_missing_from_the_fourth_all_reduce() -> dict[int, dict[str, Any]]:
    dumps = {}
    for rank in range(4):
        entries = [_entry(rank, seq, "all_reduce", [[1024]], "completed", 40) for seq in (1, 2, 3)]
        if rank != 2:  # rank 2 is still computing: it never enters collective 4
            entries.append(_entry(rank, 4, "all_reduce", [[1024]], "started", 52))
        dumps[rank] = _dump(entries)
    return dumps


def test_a_rank_missing_from_a_collective_is_named(tmp_path: Path) -> None:
    folder = _write(tmp_path / "fr", _rank_missing_from_the_fourth_all_reduce())
    report = flight.analyse(flight.read_dumps(folder))
    assert report.version == "2.10" and report.ranks == [0, 1, 2, 3] and report.matched == 3
    problem = report.problem
    assert problem is not None
    assert (problem.kind, problem.group, problem.seq, problem.op) == (
        "missing_ranks",
        "default_pg",
        4,
        "all_reduce",
    )
    assert problem.missing_ranks == [2]
    assert [c.rank for c in problem.calls] == [0, 1, 3]
    assert all(c.state == "pending" and c.call_site == "train_step (train.py:52)" for c in problem.calls)
    assert problem.elsewhere == {
        "2": "#3 all_reduce [[1024]] (completed) in default_pg at train_step (train.py:40)"
    }
    found = flight.finding(report)
    assert found is not None and found.code == "collective_mismatch"
    assert found.evidence["by_rank"]["2"]["collective"] is None and found.evidence["seq"] == 4


def test_torchfrtrace_reaches_the_same_verdict_on_these_dumps(tmp_path: Path) -> None:
    """The fixtures are what torch's own analyser expects: it finds the same missing rank."""
    folder = _write(tmp_path / "fr", _rank_missing_from_the_fourth_all_reduce())
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = run.stdout + run.stderr
    assert run.returncode == 0, text
    assert "Not all ranks joining collective, sequence number: 4" in text
    assert "missing ranks: {2}" in text


def test_type_size_and_dtype_mismatches(tmp_path: Path) -> None:
    def two(op1: str, sizes1: list[list[int]], **extra1: Any) -> flight.FlightRecorderReport:
        dumps = {
            0: _dump(
                [
                    _entry(0, 1, "all_reduce", [[8]], "completed", 10),
                    _entry(0, 2, "all_reduce", [[8]], "started", 20),
                ],
                2,
            ),
            1: _dump(
                [
                    _entry(1, 1, "all_reduce", [[8]], "completed", 10),
                    _entry(1, 2, op1, sizes1, "started", 30, **extra1),
                ],
                2,
            ),
        }
        return flight.analyse(dumps)

    typed = two("broadcast", [[8]]).problem
    assert typed is not None and typed.kind == "type_mismatch" and typed.seq == 2
    assert (
        "rank 0 calls all_reduce at train_step (train.py:20), rank 1 calls broadcast at train_step (train.py:30)"
        in typed.message
    )
    sized = two("all_reduce", [[6]]).problem
    assert sized is not None and sized.kind == "size_mismatch"
    assert "rank 0 input [[8]] output [[8]], rank 1 input [[6]] output [[6]]" in sized.message
    typed_d = two("all_reduce", [[8]], input_dtypes=["BFloat16"], output_dtypes=["BFloat16"]).problem
    assert typed_d is not None and typed_d.kind == "dtype_mismatch"
    # every rank entered alike and it did not complete: no mismatch to blame (a dead peer, the network)
    same = two("all_reduce", [[8]]).problem
    assert same is not None and same.kind == "not_completed"
    assert flight.finding(two("all_reduce", [[8]])) is None


def test_records_dropped_from_the_ring_buffer_are_not_blamed() -> None:
    full = [_entry(0, s, "all_reduce", [[4]], "completed", 10) for s in range(1, 8)]
    wrapped = [_entry(1, s, "all_reduce", [[4]], "completed", 10) for s in range(5, 8)]
    report = flight.analyse({0: _dump(full, 2), 1: _dump(wrapped, 2)})
    assert report.problem is None and report.matched == 3


def test_gloo_dumps_without_pg_config_use_the_default_group(tmp_path: Path) -> None:
    # torch 2.13's gloo dumps: pg_config {'': {...}} that names no group, states never 'completed'
    dumps = {}
    for rank in range(2):
        entries = [_entry(rank, 1, "all_reduce", [[4]], "scheduled", 7, retired=True)]
        if rank == 0:
            entries.append(_entry(rank, 2, "barrier", [[1]], "scheduled", 9, retired=False))
        dump = _dump(entries, 2)
        dump["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[]"}}
        dumps[rank] = dump
    report = flight.analyse(dumps, world_size=2)
    assert (
        report.problem is not None and report.problem.missing_ranks == [1] and report.problem.op == "barrier"
    )
    assert report.problem.calls[0].state == "pending"
    assert report.last_by_rank["1"].startswith("#1 all_reduce [[4]] (completed)")


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"

    class RunsCode:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    folder = tmp_path / "fr"
    folder.mkdir()
    (folder / "trace_0").write_bytes(pickle.dumps({"version": "2.10", "entries": [RunsCode()]}))
    with pytest.raises(AnalysisError, match="not a Flight Recorder dump"):
        flight.read_dumps(folder)
    assert not marker.exists()


def test_json_dumps_stray_files_and_one_file_for_its_siblings(tmp_path: Path) -> None:
    folder = tmp_path / "fr"
    folder.mkdir()
    for rank, dump in _rank_missing_from_the_fourth_all_reduce().items():
        (folder / f"trace_{rank}").write_text(json.dumps(dump))  # _dump_fr_trace_json's form
    (folder / "notes.txt").write_text("not a dump")
    assert sorted(flight.dump_files(folder)) == [0, 1, 2, 3]
    assert sorted(flight.dump_files(folder / "trace_1")) == [0, 1, 2, 3]
    report = flight.analyse(flight.read_dumps(folder / "trace_3"))
    assert report.problem is not None and report.problem.missing_ranks == [2]
    (folder / "trace_9").write_text("garbage")
    with pytest.raises(AnalysisError, match="trace_9 is not a Flight Recorder dump"):
        flight.read_dumps(folder)
    with pytest.raises(AnalysisError, match="does not end with a rank number"):
        flight.dump_files(folder / "notes.txt")


@pytest.mark.anyio
async def test_dump_stacks_reads_the_dumps_of_a_job_that_already_ended(workspace: Path) -> None:
    _write(workspace / "fr", _rank_missing_from_the_fourth_all_reduce())
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        result = await client.call_tool("dump_stacks", {"flight_recorder": "fr"})
        assert not result.is_error, result.content[0].text
        data = result.structured_content
        [finding] = data["findings"]
        assert finding["code"] == "collective_mismatch" and finding["evidence"]["missing_ranks"] == [2]
        assert data["flight_recorder"]["problem"]["seq"] == 4
        assert data["side_by_side"][2].startswith("rank 2: no stack (no live process given) | #3 all_reduce")
        assert "rank 2 never entered all_reduce #4 of default_pg" in result.content[0].text
        bad = await client.call_tool("dump_stacks", {"flight_recorder": "missing-folder"})
        assert bad.is_error and "does not exist" in bad.content[0].text
        nothing = await client.call_tool("dump_stacks", {})
        assert nothing.is_error and "Flight Recorder" in nothing.content[0].text
