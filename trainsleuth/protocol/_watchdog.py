"""Runs one reproducer and takes it down with the server: `python -I -S _watchdog.py SERVER_PID ARGV...`.

Standard library only, run by path (it imports nothing of trainsleuth). It lives in the process group the
server created for it (`run_process` starts a new session), starts the command there, and polls its own
parent: when the server dies (even by SIGKILL, which no cleanup handler sees) the watchdog is re-parented,
notices within a quarter of a second, and kills the whole process group, so a reproducer never
outlives the server that started it. (Linux's parent-death signal is not used: it fires when the
server *thread* that started us ends, not the server.)
"""

import os
import signal
import subprocess
import sys


def _kill_group(*_: object) -> None:
    try:
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(137)


def main() -> int:
    server = int(sys.argv[1])
    argv = sys.argv[2:]
    signal.signal(signal.SIGTERM, _kill_group)
    if os.getppid() != server:  # the server died before we got here
        _kill_group()
    child = subprocess.Popen(argv)
    while True:
        try:
            rc = child.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            if os.getppid() != server:
                _kill_group()
            continue
        return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
