"""trainsleuth's observer bootstrap, put first on PYTHONPATH by `trainsleuth.tools.observe`.

Python imports `sitecustomize` at start-up in every interpreter it launches, so the observer reaches
each process of the user's own command (`python train.py`, the workers torchrun or accelerate start,
a shell script's python) without an edit of the user's files or an install into their environment.
It does nothing unless TRAINSLEUTH_OBSERVE names a configuration, imports nothing heavy (torch is
hooked only once the user's code imports it), and hands over to the sitecustomize it shadows.
"""

import os
import sys


def _start():
    config = os.environ.get("TRAINSLEUTH_OBSERVE")
    if not config:
        return
    runners = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if runners not in sys.path:
        sys.path.append(runners)  # after the user's own paths: their modules always win
    try:
        import _ts_observe

        _ts_observe.install(config)
    except Exception as exc:  # the user's program must run even when the observer cannot
        sys.stderr.write(f"trainsleuth observer: not started: {type(exc).__name__}: {exc}\n")


def _chain():
    """Import the sitecustomize this file shadows (the environment's own), as Python would have."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.get("sitecustomize")
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        spec = importlib.util.find_spec("sitecustomize") if me is None else None
        if me is not None:
            del sys.modules["sitecustomize"]
            spec = importlib.util.find_spec("sitecustomize")
        if spec is None or spec.loader is None or spec.origin == __file__:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.stderr.write(f"trainsleuth observer: the environment's sitecustomize failed: {exc!r}\n")
    finally:
        sys.path[:] = saved
        if me is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = me


_start()
_chain()
