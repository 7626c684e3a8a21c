"""Launcher of the distributed check (torch + standard library only; torch is not imported here).

Starts one process per rank with the environment torchrun gives its workers (RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), then watches them. Starting the ranks itself, rather
than through torchrun, lets the launcher ask the surviving ranks for their records before anything
is killed: when a rank dies, when no rank has made progress for `hang_s` seconds, or at the overall
timeout, it writes `dump.request` (every rank then writes its Flight Recorder dump and its threads'
stacks), takes py-spy dumps when py-spy is available, and only then ends the job.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WAITING_PHASES = {"import", "init_process_group", "loading"}
LOG_TAIL = 6000
DUMP_GRACE_S = 8.0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid):
    """Every descendant pid (Linux /proc walk; psutil is not assumed in the user's interpreter)."""
    out = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
                out.extend(kids)
                stack.extend(kids)
        except OSError:
            continue
    return out


def kill_all(procs):
    pids = []
    for p in procs:
        if p.poll() is None:
            pids.append(p.pid)
            pids.extend(descendants(p.pid))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except Exception:
            pass


def tail(path, limit=LOG_TAIL):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit * 2))
            data = fh.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else "…" + text[-limit:]


def read_json(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def py_spy_dumps(py_spy, procs, out):
    """`py-spy dump --json` of every live rank, in parallel; the raw JSON goes to rank<r>.pyspy.json."""

    def one(rank, pid):
        try:
            res = subprocess.run(
                [py_spy, "dump", "--pid", str(pid), "--json"],
                capture_output=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
            )
            text = res.stdout.decode("utf-8", errors="replace")
            body = {"ok": res.returncode == 0, "stdout": text[:2_000_000]}
            if res.returncode != 0:
                body["error"] = res.stderr.decode("utf-8", errors="replace")[-800:]
        except Exception as exc:
            body = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        with open(os.path.join(out, f"rank{rank}.pyspy.json"), "w", encoding="utf-8") as fh:
            json.dump(body, fh)

    threads = [threading.Thread(target=one, args=(r, p.pid)) for r, p in enumerate(procs) if p.poll() is None]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)


def launch(args, worker_script):
    out = args.out
    os.makedirs(out, exist_ok=True)
    port = args.master_port or free_port()
    base_env = dict(os.environ)
    base_env.setdefault("OMP_NUM_THREADS", "1")
    # The Flight Recorder keeps the last collectives of every process group (gloo included).
    base_env.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    notes = []
    debug = base_env.get("TORCH_DISTRIBUTED_DEBUG", "").upper()
    if debug == "DETAIL":
        notes.append(
            "TORCH_DISTRIBUTED_DEBUG=DETAIL was replaced by INFO: with DETAIL, torch 2.13 on gloo crashes "
            "(SIGSEGV) even in a healthy DDP job"
        )
    if debug in ("", "DETAIL", "OFF"):
        # INFO makes DDP name the parameters that got no gradient; collective mismatches are found
        # from the Flight Recorder's records.
        base_env["TORCH_DISTRIBUTED_DEBUG"] = "INFO"
    base_env["TS_DIST_CWD"] = os.getcwd()
    base_env["PYTHONUNBUFFERED"] = "1"
    worker_argv = [
        sys.executable,
        worker_script,
        "--worker",
        "--out",
        out,
        "--steps",
        str(args.steps),
        "--backend",
        args.backend,
        "--rtol",
        repr(args.rtol),
        "--rank-rtol",
        repr(args.rank_rtol),
        "--collective-timeout",
        str(args.collective_timeout),
    ]
    for spec in args.entrypoint:
        worker_argv += ["--entrypoint", spec]
    procs = []
    logs = []
    start = time.monotonic()
    for rank in range(args.nproc):
        env = dict(base_env)
        env.update(
            {
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(args.nproc),
                "LOCAL_WORLD_SIZE": str(args.nproc),
                "GROUP_RANK": "0",
                "ROLE_RANK": str(rank),
                "ROLE_WORLD_SIZE": str(args.nproc),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            }
        )
        log = open(os.path.join(out, f"rank{rank}.log"), "wb")  # noqa: SIM115 (closed after the job)
        logs.append(log)
        procs.append(
            subprocess.Popen(
                worker_argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        )
    event = None
    first_failed = None
    last_seq = [None] * args.nproc
    last_change = time.monotonic()
    try:
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            now = time.monotonic()
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                event, first_failed = "rank_failed", failed[0]
                break
            phases = []
            for r in range(args.nproc):
                prog = read_json(os.path.join(out, f"rank{r}.progress")) or {}
                phases.append(prog.get("phase"))
                if prog.get("seq") != last_seq[r]:
                    last_seq[r] = prog.get("seq")
                    last_change = now
            waiting = any(
                ph is None or ph in WAITING_PHASES for ph, c in zip(phases, codes, strict=True) if c is None
            )
            if waiting:
                last_change = now
            if now - last_change > args.hang_s:
                event = "hang"
                break
            if now - start > args.timeout:
                event = "timeout"
                break
            time.sleep(0.1)
        if event is not None:
            collect_records(procs, out, args.py_spy)
        else:
            failed = [r for r, p in enumerate(procs) if p.returncode not in (None, 0)]
            if failed:  # every rank ended at once, some with an error
                event, first_failed = "rank_failed", failed[0]
    finally:
        kill_all(procs)
        for log in logs:
            log.close()
    duration = time.monotonic() - start
    ranks = []
    for r, p in enumerate(procs):
        rc = p.returncode
        entry = {
            "rank": r,
            "pid": p.pid,
            "returncode": rc,
            "signal": signal.Signals(-rc).name if rc is not None and rc < 0 and -rc in _signals() else None,
            "killed_by_launcher": event is not None and r != first_failed and rc == -signal.SIGKILL,
            "progress": read_json(os.path.join(out, f"rank{r}.progress")),
            "report": read_json(os.path.join(out, f"rank{r}.json")),
            "dumped": read_json(os.path.join(out, f"rank{r}.dumped")),
            "log_tail": tail(os.path.join(out, f"rank{r}.log")),
            "stacks": tail(os.path.join(out, f"rank{r}.stacks"), 20000),
        }
        ranks.append(entry)
    summary = read_json(os.path.join(out, "summary.json"))
    return {
        "ok": True,
        "nproc": args.nproc,
        "event": event,
        "first_failed": first_failed,
        "hang_s": args.hang_s,
        "duration_s": duration,
        "ranks": ranks,
        "cases": (summary or {}).get("cases", []),
        "out": out,
        "notes": notes,
        "torch_distributed_debug": base_env.get("TORCH_DISTRIBUTED_DEBUG"),
        "command": [sys.executable, os.path.basename(worker_script), "--worker", "..."],
    }


def _signals():
    return {int(s) for s in signal.Signals}


def collect_records(procs, out, py_spy):
    """Ask every live rank for its Flight Recorder dump and stacks, then take py-spy dumps."""
    with open(os.path.join(out, "dump.request"), "w") as fh:
        fh.write(str(time.time()))
    if py_spy:
        py_spy_dumps(py_spy, procs, out)
    deadline = time.monotonic() + DUMP_GRACE_S
    while time.monotonic() < deadline:
        pending = [
            r
            for r, p in enumerate(procs)
            if p.poll() is None and not os.path.exists(os.path.join(out, f"rank{r}.dumped"))
        ]
        if not pending:
            break
        time.sleep(0.1)
