"""Write tiny pure-Python wheels by hand (no build backend, no network).

Used by the bisect tests, the bisect benchmark and demos to give uv a local package index
(`--find-links DIR --no-index`) with many versions of one package.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    files: Mapping[str, str],
    *,
    requires: Sequence[str] = (),
) -> Path:
    """Write `{name}-{version}-py3-none-any.whl` holding `files` (archive path -> text) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = _normalize(name)
    info = f"{dist}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {req}" for req in requires]
    entries: dict[str, bytes] = {path: text.encode() for path, text in files.items()}
    entries[f"{info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    entries[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: trainsleuth\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record_lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in entries.items()]
    record_lines.append(f"{info}/RECORD,,")
    entries[f"{info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    target = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data in entries.items():
            info_obj = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info_obj.external_attr = 0o644 << 16
            zf.writestr(info_obj, data)
    return target
