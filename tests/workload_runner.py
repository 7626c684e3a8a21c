"""Run many workload scripts as separate processes that share one torch import.

`python tests/workload_runner.py --jobs N` reads a JSON list of {"name", "argv"} on stdin, imports
torch once, then forks one child per script: the child sets `sys.argv` and `sys.path[0]` as
`python SCRIPT ARGS` would, runs the file as `__main__` (runpy), and exits with its status; its
stdout and stderr go to files of its own. It prints one JSON line per script: name, returncode,
stdout, stderr, seconds
(wall) and cpu_seconds. Importing torch (and torch._dynamo, which the first optimizer imports) costs
about 4 s of CPU, more than most workloads take to train; forking after the import (and before any torch op, so no thread pool exists yet)
keeps every script in a fresh process of its own without paying for it again.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import tempfile
import time
import traceback


def _child(argv: list[str], out_path: str, err_path: str) -> None:
    code = 1
    try:
        out_fd = os.open(out_path, os.O_WRONLY | os.O_TRUNC)
        err_fd = os.open(err_path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        try:
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2)
    jobs = parser.parse_args().jobs
    todo = json.load(sys.stdin)
    # Imported once here, shared by every child. torch._dynamo is what the first optimizer a script
    # builds imports (2 s of CPU). No torch op runs here, so no thread pool exists to be forked.
    import numpy  # noqa: F401
    import torch._dynamo  # noqa: F401

    running: dict[int, tuple[dict, str, str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        queue = list(enumerate(todo))
        while queue or running:
            while queue and len(running) < jobs:
                i, item = queue.pop(0)
                out_path, err_path = os.path.join(tmp, f"{i}.out"), os.path.join(tmp, f"{i}.err")
                for path in (out_path, err_path):
                    open(path, "w").close()
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    _child(item["argv"], out_path, err_path)
                running[pid] = (item, out_path, err_path, time.perf_counter())
            pid, status, usage = os.wait4(-1, 0)
            item, out_path, err_path, start = running.pop(pid)
            with open(out_path) as out, open(err_path) as err:
                result = {
                    "name": item["name"],
                    "returncode": os.waitstatus_to_exitcode(status),
                    "stdout": out.read(),
                    "stderr": err.read(),
                    "seconds": time.perf_counter() - start,
                    "cpu_seconds": usage.ru_utime + usage.ru_stime,
                }
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
