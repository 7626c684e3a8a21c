"""Distributed correctness check, run in the user's interpreter (torch + standard library only).

Launcher mode (default): `_ts_dist_launch` starts one process per rank on this same script in
worker mode, watches them (a rank that dies, no progress for `--hang-s`, the overall timeout),
collects every rank's Flight Recorder dump, stacks and log when something goes wrong, and writes
one JSON answer. Worker mode: `_ts_dist_worker` runs each `--entrypoint` in turn on one rank.
The launcher's folder (`--out`) belongs to the caller, which reads the dumps and removes it.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import _ts_entrypoint as ep  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--result")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--out", required=True)
    parser.add_argument("--entrypoint", action="append", required=True)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--rank-rtol", type=float, default=1e-6)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--hang-s", type=float, default=90.0)
    parser.add_argument("--collective-timeout", type=int, default=300)
    parser.add_argument("--master-port", type=int, default=0)
    parser.add_argument("--py-spy", default=None)
    args = parser.parse_args(argv)
    if args.worker:
        import _ts_dist_worker

        return _ts_dist_worker.worker(args)
    if not args.result:
        parser.error("--result is required in launcher mode")
    try:
        import _ts_dist_launch

        payload = _ts_dist_launch.launch(args, os.path.abspath(__file__))
    except Exception as exc:
        payload = ep.unexpected_failure(exc)
    ep.write_result(args.result, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
