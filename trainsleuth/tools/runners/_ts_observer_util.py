"""The observer's helpers: where the user's code is in a stack, who this process is, the report files.
Torch-free: the standard library only (imported at start-up, before the user's code imports torch).
"""

import json
import os
import socket
import sys
from typing import Any

_open = open  # the observer's own files: taken before the guard wraps `open`

HERE = os.path.dirname(os.path.abspath(__file__))


def user_site(skip=()):
    """`file:line in function` of the innermost frame that is the user's code (not torch, not us)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_library(filename) and not any(s in filename for s in skip):
            return f"{filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None


_LIB_MARKERS = (
    os.sep + "torch" + os.sep,
    os.sep + "site-packages" + os.sep,
    os.sep + "dist-packages" + os.sep,
    "<frozen ",
    "<string>",
)


def _is_library(filename):
    if filename.startswith(HERE):
        return True
    return any(m in filename for m in _LIB_MARKERS) or filename.startswith(sys.base_prefix + os.sep + "lib")


def identity():
    env = os.environ
    node = env.get("GROUP_RANK") or env.get("NODE_RANK") or env.get("SLURM_NODEID") or "0"
    return {
        "pid": os.getpid(),
        "rank": _int(env.get("RANK"), 0),
        "local_rank": _int(env.get("LOCAL_RANK"), 0),
        "world_size": _int(env.get("WORLD_SIZE"), 1),
        "node": _int(node, 0),
        "hostname": socket.gethostname(),
        "argv": list(sys.argv)[:32],
        "python": sys.executable,
    }


def _int(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _write_json(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with _open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, default=_jsonable)
    os.replace(tmp, path)


def _jsonable(value):
    try:
        return float(value)
    except Exception:
        return repr(value)[:200]
