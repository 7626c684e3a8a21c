"""Walk a run folder safely: regular files only, symlinks only where they may lead, bounded.

A FIFO named like a log (`trainer_state.json`, `events.out.tfevents.*`) would block the reader
forever, a device such as `/dev/zero` never ends, and a symlink can lead out of the workspace:
none of them is returned, and each is listed in the notes so the user sees what was left out."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from trainsleuth.tools.logs.source import LogInputError, kind_of

MAX_DIR_ENTRIES = 20000
MAX_DEPTH = 6


@dataclass
class FolderEntries:
    files: list[Path] = field(default_factory=list)  # regular files, tfevents included
    truncated: bool = False  # more than MAX_DIR_ENTRIES entries
    skipped: dict[str, list[str]] = field(default_factory=dict)  # why -> relative names

    def skip(self, why: str, name: str) -> None:
        self.skipped.setdefault(why, []).append(name)

    def notes(self) -> list[str]:
        out = []
        for why, names in self.skipped.items():
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            out.append(
                f"skipped {len(names)} folder entr{'y' if len(names) == 1 else 'ies'} ({why}): {shown}"
            )
        return out


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def walk(folder: Path, roots: list[Path] | None = None) -> FolderEntries:
    """Regular files under `folder` (hidden folders and more than MAX_DEPTH levels left out).
    A symlink is followed only to a regular file inside `roots` (None: anywhere) and never to a
    folder."""
    out = FolderEntries()
    base = folder.resolve()
    allowed = [base, *(r.resolve() for r in roots)] if roots is not None else None
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if d == folder:
                raise LogInputError(
                    f"{folder}: cannot list the folder ({exc})", "check its permissions"
                ) from None
            out.skip("cannot be listed", os.path.relpath(d, folder))
            continue
        subdirs = []
        for e in entries:
            rel = os.path.relpath(e.path, folder)
            try:
                if e.is_symlink():
                    _follow(Path(e.path), rel, allowed, out)
                elif e.is_dir(follow_symlinks=False):
                    if not e.name.startswith(".") and depth < MAX_DEPTH:
                        subdirs.append(Path(e.path))
                else:
                    mode = e.stat(follow_symlinks=False).st_mode
                    if stat.S_ISREG(mode):
                        out.files.append(Path(e.path))
                    else:
                        out.skip(f"{kind_of(mode)}, not a regular file", rel)
            except OSError:
                out.skip("cannot be read", rel)
            if len(out.files) >= MAX_DIR_ENTRIES:
                out.truncated = True
                return out
        stack.extend((s, depth + 1) for s in reversed(subdirs))
    return out


def _follow(link: Path, rel: str, allowed: list[Path] | None, out: FolderEntries) -> None:
    try:
        target = link.resolve(strict=True)
        mode = os.stat(target).st_mode
    except (OSError, RuntimeError):
        out.skip("broken symlink", rel)
        return
    if allowed is not None and not _inside(target, allowed):
        out.skip("symlink leading outside the workspace", rel)
    elif stat.S_ISDIR(mode):
        out.skip("symlinked folder, not followed", rel)
    elif not stat.S_ISREG(mode):
        out.skip(f"symlink to {kind_of(mode)}, not a regular file", rel)
    else:
        out.files.append(link)
