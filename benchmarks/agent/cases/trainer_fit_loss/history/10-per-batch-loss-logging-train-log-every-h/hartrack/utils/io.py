"""Small file helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def save_json(path: str | Path, data: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=float))


def load_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())
