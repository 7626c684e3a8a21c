"""Evaluate a checkpoint: ``python tools/evaluate.py --config C --checkpoint runs/x/best.pt``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchcast.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["evaluate", *sys.argv[1:]]))
