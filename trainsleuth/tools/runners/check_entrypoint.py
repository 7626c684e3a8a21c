"""Load an entrypoint and check its contract, without training (standalone: torch + stdlib).

Usage: python check_entrypoint.py --result OUT.json --entrypoint SPEC [--cwd DIR]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _ts_entrypoint as ep


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--result", required=True)
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--cwd", default=None)
    args = parser.parse_args()
    try:
        try:
            import torch
        except ImportError:
            raise ep.EntrypointError(
                "no_torch", f"torch is not installed in the target interpreter {sys.executable}"
            ) from None
        contract = ep.load_contract(args.entrypoint, args.cwd or os.getcwd())
        model = contract["model"]
        report = {
            "python": sys.executable,
            "torch": torch.__version__,
            "model_class": type(model).__name__,
            "num_parameters": sum(p.numel() for p in model.parameters()),
            "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "num_batches": len(contract["batches"]),
            "keys": sorted(k for k in ep.CONTRACT_KEYS if contract.get(k) is not None),
            "unknown_keys": contract["unknown_keys"],
        }
        ep.write_result(args.result, {"ok": True, "report": report})
    except ep.EntrypointError as exc:
        ep.write_result(args.result, {"ok": False, "error": exc.to_json()})


if __name__ == "__main__":
    main()
