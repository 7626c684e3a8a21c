"""git: which subcommands and options change the working tree, and which files.

Reading (log, diff, show, status, blame, grep, ...) writes nothing; `checkout`/`restore`/`rm`/`mv` write
the paths they name (or the whole tree when a name may be a branch); `reset`, `stash`, `apply`, `merge`,
`switch`, `pull`, ... change the whole tree; `-C DIR` moves where paths are; `-c key=value`,
`--exec-path` and `GIT_*` variables can make git run other programs; `--work-tree`/`--git-dir` point at
another tree. Unknown subcommands (aliases) count as writes.
"""

from __future__ import annotations

import os
import re

from trainsleuth.clients.gate.analysis import Analysis
from trainsleuth.clients.gate.model import Command, Cwds, Outcome, Word
from trainsleuth.clients.gate.options import _in_dir, parse

_GIT_READS = frozenset(
    [
        "log",
        "show",
        "diff",
        "status",
        "blame",
        "annotate",
        "shortlog",
        "describe",
        "rev-parse",
        "rev-list",
        "ls-files",
        "ls-tree",
        "ls-remote",
        "cat-file",
        "grep",
        "show-ref",
        "for-each-ref",
        "merge-base",
        "name-rev",
        "whatchanged",
        "count-objects",
        "version",
        "help",
        "var",
        "check-ignore",
        "check-attr",
        "check-ref-format",
        "check-mailmap",
        "diff-tree",
        "diff-files",
        "diff-index",
        "range-diff",
        "cherry",
        "verify-commit",
        "verify-tag",
        "fsck",
        "show-branch",
        "fetch",
        "get-tar-commit-id",
        "--version",
        "--help",
    ]
)
_GIT_LIST_ONLY = {
    "branch": {"-a", "-r", "-l", "--list", "-v", "-vv", "--all", "--remotes", "--show-current", "--contains",
               "--merged", "--no-merged", "--points-at", "--column", "--no-column", "--color", "--no-color",
               "--verbose", "--sort", "--format", "--abbrev", "--no-abbrev", "-i", "--ignore-case"},
    "tag": {"-l", "--list", "-n", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at",
            "--sort", "--format", "--column", "-i", "--ignore-case", "--color"},
    "remote": {"-v", "--verbose", "show", "get-url"},
    "stash": {"list", "show"},
    "config": {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list", "--show-origin",
               "--show-scope", "--name-only", "--global", "--local", "--system", "get", "list", "-z", "--null",
               "--type", "--bool", "--int", "--path", "--default", "--includes", "--no-includes", "-f", "--file"},
    "worktree": {"list"},
    "bisect": {"log", "visualize", "view"},
    "submodule": {"status", "summary"},
    "notes": {"list", "show"},
    "reflog": {"show"},
    "sparse-checkout": {"list"},
    "lfs": {"ls-files", "status", "env", "version"},
}  # fmt: skip
_GIT_SAFE_CONFIG = re.compile(r"^(color\.[\w.]+|core\.quotepath|log\.\w+|i18n\.\w+|column\.\w+|advice\.\w+|"
                              r"safe\.directory|diff\.(renames|noprefix|mnemonicprefix|context)|"
                              r"status\.\w+|grep\.\w+|pager\.\w+=(false|true))=")  # fmt: skip


def git_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    cwds = cmd.cwds
    other_tree = False
    i = 0
    while i < len(args):
        t = args[i].text
        if t is None:
            an.unknown("`git` with an argument only known when it runs")
            return None
        if not t.startswith("-"):
            break
        if t == "-C":
            cwds = _in_dir(cwds, args[i + 1] if i + 1 < len(args) else None)
            i += 2
            continue
        if t == "-c":
            value = args[i + 1] if i + 1 < len(args) else None
            if value is None or value.text is None or not _GIT_SAFE_CONFIG.match(value.text):
                an.unknown("`git -c` can make git run other programs")
            i += 2
            continue
        if t.startswith(("--git-dir", "--work-tree", "--namespace")):
            other_tree = True
        elif t.startswith(("--exec-path=", "--config-env", "--super-prefix")):
            an.unknown(f"`git {t.split('=')[0]}` can make git run other programs")
        i += 1 if "=" in t or t not in ("--git-dir", "--work-tree", "--namespace", "--config-env") else 2
    if i >= len(args):
        return None
    sub = args[i].text or ""
    rest = args[i + 1 :]
    texts = [a.text for a in rest]
    why = f"`git {sub}`"
    for j, a in enumerate(rest):
        if a.text is not None and a.text.startswith("--output="):
            an.write(Word(a.text[9:], a.glob, a.source), f"{why} --output", cwds)
        elif a.text == "--output" and j + 1 < len(rest):
            an.write(rest[j + 1], f"{why} --output", cwds)
    if sub in _GIT_READS:
        if sub == "grep" and any(
            t in ("-O", "--open-files-in-pager") or (t or "").startswith("-O") for t in texts
        ):
            an.unknown("`git grep -O` runs a program")
        if sub == "diff" and any(t in ("--ext-diff",) for t in texts):
            an.unknown("`git diff --ext-diff` runs a program")
        return None
    if sub in _GIT_LIST_ONLY and _git_lists_only(sub, [t for t in texts if t is not None]):
        return None
    if sub in ("checkout", "restore", "rm", "mv") and not other_tree:
        return _git_paths(an, sub, rest, cwds)
    if sub == "add" and not other_tree:
        return None  # stages content in the index; no file in the tree changes
    if sub == "apply" and _apply_only_reports(texts):
        return None
    if sub == "clean" and any(
        t and t.startswith("-") and not t.startswith("--") and ("x" in t or "X" in t) for t in texts
    ):
        an.write(Word.literal(".trainsleuth/state.db"), "`git clean -x` (removes ignored files)", cwds)
    if sub in ("archive", "format-patch", "bundle"):
        parsed = parse(rest, "o", ("--output", "--output-directory"))
        out = parsed.value("-o", "--output", "--output-directory")
        if out is not None:
            target = (
                out
                if sub == "archive"
                else Word(None if out.text is None else out.text.rstrip("/") + "/*", True, out.source)
            )
            an.write(target, why, cwds)
            return None
    for cwd in cwds if not other_tree else [None]:
        an.write(
            Word.literal("*") if cwd is not None else None,
            f"{why} changes files of the working tree",
            frozenset({cwd}),
        )
    return None


_GIT_LISTING_FLAGS = {"-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"}
_GIT_CONFIG_READS = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list", "get", "list"}


def _apply_only_reports(texts: list[str | None]) -> bool:
    """`git apply --check|--stat|--numstat|--summary` (without --apply) reads the patch only."""
    reports = any(t in ("--check", "--stat", "--numstat", "--summary") for t in texts)
    return reports and "--apply" not in texts


def _git_lists_only(sub: str, texts: list[str]) -> bool:
    """`git branch`, `git tag -l`, `git config --get`, `git stash list`, ...: listing, not changing."""
    allowed = _GIT_LIST_ONLY[sub]
    flags = [t.split("=", 1)[0] for t in texts if t.startswith("-")]
    positional = [t for t in texts if not t.startswith("-")]
    if sub in ("branch", "tag"):
        if not all(f in allowed or (sub == "tag" and f.startswith("-n")) for f in flags):
            return False
        return not positional or bool(set(flags) & _GIT_LISTING_FLAGS)
    if sub == "config":
        if not all(f in allowed for f in flags):
            return False
        return bool(set(texts) & _GIT_CONFIG_READS) or len(positional) <= 1
    if sub in ("remote", "reflog") and not texts:
        return True
    return (
        bool(texts)
        and texts[0] in allowed
        and all(f in allowed or f in ("-p", "--stat", "-v", "--oneline") for f in flags[:0])
    )


def _git_paths(an: Analysis, sub: str, rest: list[Word], cwds: Cwds) -> Outcome | None:
    """checkout/restore/rm/mv: the paths they write, or the whole tree when not known."""
    why = f"`git {sub}`"
    parsed = parse(
        rest,
        "sbBpUm" if sub in ("checkout", "restore") else "",
        ("--source", "--conflict", "--pathspec-from-file"),
    )
    if parsed.has("--pathspec-from-file"):
        an.write(None, why, cwds)
        return None
    texts = [a.text for a in rest]
    if "--" in texts:
        paths = rest[texts.index("--") + 1 :]
    elif sub == "checkout":
        operands = parsed.operands
        # `git checkout NAME` switches branches (the whole tree) unless every NAME is an existing path.
        existing = [w for w in operands[1:]] if len(operands) > 1 else []
        paths = existing if existing and all(_exists(an, w, cwds) for w in existing) else []
        if not paths:
            for cwd in cwds:
                an.write(
                    Word.literal("*") if cwd is not None else None,
                    f"{why} changes files of the working tree",
                    frozenset({cwd}),
                )
            return None
    else:
        paths = parsed.operands
    if not paths:
        an.write(None, why, cwds)
    for p in paths:
        if p.text is not None and p.text.startswith(":"):
            an.write(None, f"{why} with a pathspec", cwds)
        else:
            an.write(p, why, cwds)
    return None


def _exists(an: Analysis, word: Word, cwds: Cwds) -> bool:
    if word.text is None:
        return False
    return all(c is not None and os.path.exists(os.path.join(an.base, c, word.text)) for c in cwds)
