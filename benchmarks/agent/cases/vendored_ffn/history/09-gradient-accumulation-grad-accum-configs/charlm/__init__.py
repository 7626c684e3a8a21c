"""charlm: character-level language models on top of the vendored lmblocks library."""

import sys
from pathlib import Path

# third_party/ holds the vendored lmblocks; make it importable as a top-level package
_THIRD_PARTY = Path(__file__).resolve().parents[1] / "third_party"
if str(_THIRD_PARTY) not in sys.path:
    sys.path.insert(0, str(_THIRD_PARTY))

__version__ = "0.5.0"
