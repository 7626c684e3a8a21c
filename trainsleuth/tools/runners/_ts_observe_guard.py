"""Keep an observed run's writes out of the user's folders. Standard library only (torch.save once imported).

The server runs the user's command in a scratch copy of the workspace (`tools/observe/mirror.py`):
tracked and untracked source files are copied, ignored entries (data, checkpoints, the .git folder) and
the workspace's neighbours are symbolic links back to the originals, so reads see the user's data.
This guard makes the copy copy-on-write for everything Python writes:

- a write to a path inside the copy that resolves outside it (through one of those links) first
  replaces the linked folders on its way by real folders of links, and the linked file itself by a
  copy, so the write lands in the copy;
- a write to a path inside the user's workspace (an absolute path, or one resolved with `realpath`)
  is sent to the same place in the copy, and a later read of that path reads what the run wrote.

It wraps `open`/`io.open`, `os.open`, `os.mkdir`/`makedirs`, `os.remove`/`unlink`/`rmdir`,
`os.rename`/`replace`, `shutil.rmtree` and, once torch is imported, `torch.save`. What is written by
native code (a C library opening a path itself) is not seen here; the server compares the workspace
before and after the run and names anything that changed.
"""

import builtins
import io
import os
import shutil

_real: dict = {
    "open": builtins.open,
    "os.open": os.open,
    "mkdir": os.mkdir,
    "makedirs": os.makedirs,
    "remove": os.remove,
    "unlink": os.unlink,
    "rmdir": os.rmdir,
    "rename": os.rename,
    "replace": os.replace,
    "rmtree": shutil.rmtree,
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_guard = None


def real_open(*args, **kwargs):
    """The unwrapped `open`, for the observer's own files."""
    return _real["open"](*args, **kwargs)


def install(mirror, workspace, exempt=()):
    """Wrap the file functions so that writes meant for `workspace` land in `mirror`."""
    global _guard
    if _guard is None:
        _guard = Guard(mirror, workspace, exempt)
        _guard.patch()
    return _guard


def protect_torch(torch):
    if _guard is not None:
        _guard.patch_torch(torch)


def _within(path, root):
    return path == root or path.startswith(root + os.sep)


class Guard:
    def __init__(self, mirror, workspace, exempt):
        self.mirror = os.path.realpath(mirror)
        self.workspace = os.path.realpath(workspace)
        self.exempt = [os.path.realpath(e) for e in exempt]
        self.redirected = 0

    # -------------------------------------------------------------- path rules

    def for_write(self, path, keep_content=True):
        """Where a write to `path` must go; materialises linked folders/files on the way."""
        try:
            if isinstance(path, int):
                return path
            fspath = os.fspath(path)
        except TypeError:
            return path
        is_bytes = isinstance(fspath, bytes)
        text = os.fsdecode(fspath)
        absolute = os.path.abspath(text)
        real = os.path.realpath(absolute)
        if any(_within(real, e) or _within(absolute, e) for e in self.exempt):
            return path
        if _within(absolute, self.mirror):
            if _within(real, self.mirror):
                return path
            self._materialise(absolute, keep_content)
            self.redirected += 1
            return path
        if _within(real, self.workspace):
            target = self.mirror + real[len(self.workspace) :]
            self._materialise(target, keep_content)
            self.redirected += 1
            return os.fsencode(target) if is_bytes else target
        return path

    def for_read(self, path):
        """A read of the user's workspace sees what this run wrote there (in the copy), if it did."""
        try:
            if isinstance(path, int):
                return path
            text = os.fsdecode(os.fspath(path))
        except TypeError:
            return path
        absolute = os.path.abspath(text)
        if _within(absolute, self.mirror):
            return path
        real = os.path.realpath(absolute)
        if _within(real, self.workspace) and not any(_within(real, e) for e in self.exempt):
            target = self.mirror + real[len(self.workspace) :]
            if os.path.lexists(target) and not os.path.islink(target):
                return target
        return path

    def _materialise(self, target, keep_content):
        """Make every folder on the way to `target` (inside the mirror) real, and `target` not a link."""
        rel = os.path.relpath(target, self.mirror)
        parts = [] if rel == "." else rel.split(os.sep)
        current = self.mirror
        for i, part in enumerate(parts):
            current = os.path.join(current, part)
            last = i == len(parts) - 1
            if not os.path.islink(current):
                if not last and not os.path.exists(current):
                    return  # the rest does not exist yet: the write creates it inside the mirror
                continue
            source = os.path.realpath(current)
            if _within(source, self.mirror):
                continue
            _real["unlink"](current)
            if os.path.isdir(source):
                _real["mkdir"](current)
                for entry in os.listdir(source):
                    os.symlink(os.path.join(source, entry), os.path.join(current, entry))
            elif last and keep_content and os.path.isfile(source):
                shutil.copy2(source, current)

    # -------------------------------------------------------------- wrappers

    def patch(self):
        guard = self

        def open_(file, mode="r", *args, **kwargs):
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                file = guard.for_write(file, keep_content="w" not in mode)
            else:
                file = guard.for_read(file)
            return _real["open"](file, mode, *args, **kwargs)

        def os_open(path, flags, *args, **kwargs):
            if flags & _WRITE_FLAGS:
                path = guard.for_write(path, keep_content=not flags & os.O_TRUNC)
            else:
                path = guard.for_read(path)
            return _real["os.open"](path, flags, *args, **kwargs)

        def one(name):
            fn = _real[name]

            def wrapped(path, *args, **kwargs):
                return fn(guard.for_write(path, keep_content=False), *args, **kwargs)

            wrapped.__name__ = getattr(fn, "__name__", name)
            wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
            return wrapped

        def two(name):
            fn = _real[name]

            def wrapped(src, dst, *args, **kwargs):
                return fn(guard.for_write(src), guard.for_write(dst, keep_content=False), *args, **kwargs)

            wrapped.__name__ = getattr(fn, "__name__", name)
            wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
            return wrapped

        open_.__wrapped__ = _real["open"]  # type: ignore[attr-defined]
        builtins.open = open_
        io.open = open_
        os.open = os_open
        os.mkdir = one("mkdir")
        os.makedirs = one("makedirs")
        os.remove = one("remove")
        os.unlink = one("unlink")
        os.rmdir = one("rmdir")
        os.rename = two("rename")
        os.replace = two("replace")
        shutil.rmtree = one("rmtree")

    def patch_torch(self, torch):
        original = torch.save
        guard = self

        def save(obj, f, *args, **kwargs):
            if isinstance(f, (str, bytes, os.PathLike)):
                f = guard.for_write(f, keep_content=False)
            return original(obj, f, *args, **kwargs)

        save.__wrapped__ = original  # type: ignore[attr-defined]
        torch.save = save
        load = torch.load

        def load_(f, *args, **kwargs):
            if isinstance(f, (str, bytes, os.PathLike)):
                f = guard.for_read(f)
            return load(f, *args, **kwargs)

        load_.__wrapped__ = load  # type: ignore[attr-defined]
        torch.load = load_
