"""Programs that write files, and where: cp/mv/ln/rsync destinations (and mv's sources, and what a
link points at), tee, dd of=, rm/touch/mkdir/chmod operands, archives, patch, sqlite3, find -delete
and -exec, download and output options (curl -o, wget, sort -o), and a few tools by subcommand.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from trainsleuth.clients.gate.analysis import Analysis
from trainsleuth.clients.gate.model import Command, Outcome, Word
from trainsleuth.clients.gate.options import Rule, parse


def all_operands(with_value: str = "", long_with_value: Iterable[str] = (), skip_first: bool = False) -> Rule:
    """rm, touch, mkdir, truncate, chmod (MODE first), ...: every operand is written."""
    long_values = tuple(long_with_value)

    def rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
        parsed = parse(args, with_value, long_values)
        operands = parsed.operands
        if skip_first and not any(n == "--reference" for n, _ in parsed.options):
            operands = operands[1:]
        if not operands:
            an.unknown(f"`{prog}` without a file operand")
        for w in operands:
            an.write(w, f"`{prog}`", cmd.cwds)
        return None

    return rule


def _into(dest: Word, source: Word) -> Word:
    """DEST/basename(SOURCE): where `cp SOURCE DEST` writes when DEST is a folder."""
    if dest.text is None:
        return dest
    if source.text is None:
        return Word(dest.text.rstrip("/") + "/*", True, dest.source)
    return Word(
        os.path.join(dest.text, os.path.basename(source.text.rstrip("/"))),
        dest.glob or source.glob,
        dest.source,
    )


def copy_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    """cp, mv, install, ln, rsync, scp, link: the destination (and, for mv, the sources)."""
    value_opts = {
        "cp": ("tSZ", ("--target-directory", "--suffix", "--backup", "--context", "--sparse", "--reflink")),
        "mv": ("tS", ("--target-directory", "--suffix", "--backup", "--context")),
        "install": ("tSgmoZ", ("--target-directory", "--suffix", "--group", "--mode", "--owner", "--context",
                               "--strip-program")),
        "ln": ("tS", ("--target-directory", "--suffix", "--backup")),
        "rsync": ("efBT", ("--rsh", "--filter", "--exclude", "--include", "--exclude-from", "--include-from",
                           "--files-from", "--temp-dir", "--partial-dir", "--backup-dir", "--suffix",
                           "--compare-dest", "--copy-dest", "--link-dest", "--log-file", "--chmod",
                           "--rsync-path", "--out-format", "--timeout", "--bwlimit", "--max-size",
                           "--min-size")),
        "scp": ("cFiJloPS", ()),
        "link": ("", ()),
    }[prog]  # fmt: skip
    parsed = parse(args, value_opts[0], value_opts[1])
    operands = parsed.operands
    why = f"`{prog}`"
    if prog in ("rsync", "scp") and any(w.text is None or re.match(r"^[^/]*:", w.text) for w in operands):
        an.unknown(f"{why} with a remote or unknown path")
        return None
    if prog == "rsync" and parsed.has("--log-file"):
        an.write(parsed.value("--log-file"), why, cmd.cwds)
    target_dir = parsed.value("-t", "--target-directory")
    if target_dir is not None or parsed.has("-t", "--target-directory"):
        sources = operands
        dests = [_into(target_dir, s) for s in sources] if target_dir is not None else [None]
    elif prog == "install" and parsed.has("-d", "--directory"):
        sources, dests = [], list(operands)
    elif len(operands) >= 2:
        sources, dest = operands[:-1], operands[-1]
        # DEST may be a folder (then each source lands inside it) or a file name: both are written.
        dests = [dest, *(_into(dest, s) for s in sources)]
    elif len(operands) == 1 and prog in ("ln", "rsync", "scp"):
        sources, dests = operands, [_into(Word.literal("."), operands[0])]
    else:
        an.unknown(f"{why} with an unexpected set of operands")
        return None
    for d in dests:
        an.write(d, why, cmd.cwds)
    if prog == "mv" or (prog == "rsync" and parsed.has("--remove-source-files")):
        for s in sources:
            an.write(s, f"{why} (removes the source)", cmd.cwds)
    makes_links = (
        prog in ("ln", "link")
        or (prog in ("cp",) and parsed.has("-s", "-l", "--symbolic-link", "--link"))
        or (prog == "rsync" and parsed.has("--link-dest"))
    )
    if makes_links:
        # A link makes later writes through it land on its source: the source counts as written.
        for s in sources:
            an.write(s, f"{why} (links to it, so writes through the link change it)", cmd.cwds)
            if s.text is not None and not os.path.isabs(s.text):
                for d in dests[:1]:
                    if d is not None and d.text is not None:
                        relative_to_link = os.path.join(os.path.dirname(d.text), s.text)
                        an.write(Word(relative_to_link, s.glob, s.source), f"{why} (link target)", cmd.cwds)
    return None


def tee_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    for w in parse(args, "", ("--output-error",)).operands:
        an.write(w, "`tee`", cmd.cwds)
    return None


def dd_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    for w in args:
        if w.text is None:
            an.unknown("`dd` with an operand only known when it runs")
        elif w.text.startswith("of="):
            an.write(Word(w.text[3:], w.glob, w.source), "`dd of=`", cmd.cwds)
    return None


def truncate_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    return all_operands("sr", ("--size", "--reference"))(an, cmd, prog, args)


def find_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    roots: list[Word] = []
    i = 0
    while i < len(args) and args[i].text in ("-H", "-L", "-P", "-O0", "-O1", "-O2", "-O3", "-D"):
        i += 2 if args[i].text == "-D" else 1
    while (
        i < len(args)
        and not (args[i].text or "").startswith(("-", "(", "!", ")"))
        and args[i].text is not None
    ):
        roots.append(args[i])
        i += 1
    roots = roots or [Word.literal(".")]
    inside = [Word(None if r.text is None else r.text.rstrip("/") + "/*", True, r.source) for r in roots]
    while i < len(args):
        t = args[i].text
        if t is None:
            i += 1
            continue
        if t == "-delete":
            for w in inside:
                an.write(w, "`find -delete`", cmd.cwds)
        elif t in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            an.write(args[i + 1] if i + 1 < len(args) else None, f"`find {t}`", cmd.cwds)
        elif t in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            words: list[Word] = []
            while j < len(args) and args[j].text not in (";", "+"):
                words.append(args[j])
                j += 1
            for place in inside:
                subst = [
                    Word(place.text, True, "{}") if (w.text is not None and "{}" in w.text) else w
                    for w in words
                ]
                if subst:
                    sub_cwds = frozenset({None}) if t in ("-execdir", "-okdir") else cmd.cwds
                    an.command(Command(subst, sub_cwds if t.endswith("dir") else cmd.cwds, cmd.depth))
            i = j
        i += 1
    return None


def output_option_rule(short: str, long: Iterable[str], default_write: bool = False) -> Rule:
    """Readers that write only with an output option (sort -o, curl -o, wget -O, ...)."""
    long_names = tuple(long)

    def rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
        parsed = parse(args, short, long_names)
        found = False
        for name, value in parsed.options:
            if name.lstrip("-") in short or name in long_names:
                if value is not None and value.text == "-":
                    found = True
                    continue
                an.write(value, f"`{prog} {name}`", cmd.cwds)
                found = True
        if prog == "curl" and parsed.has("-O", "--remote-name", "--remote-name-all", "-J"):
            an.unknown("`curl -O` writes a file named after the URL")
        if default_write and not found:
            an.unknown(f"`{prog}` writes a file named after its input")
        return None

    return rule


def uniq_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    operands = parse(
        args, "fsw", ("--skip-fields", "--skip-chars", "--check-chars", "--group", "--all-repeated")
    ).operands
    if len(operands) >= 2:
        an.write(operands[1], "`uniq` output file", cmd.cwds)
    return None


def archive_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    if prog == "tar":
        first = args[0].text if args else ""
        flags = (first or "").lstrip("-") if first and not first.startswith("--") else ""
        texts = {a.text for a in args}
        listing = "t" in flags or "--list" in texts
        creating = "c" in flags or "--create" in texts or "r" in flags or "u" in flags or "--append" in texts
        if listing and not creating:
            return None
        if creating:
            parsed = parse(args[1:] if flags else args, "fCT", ("--file", "--directory", "--files-from"))
            target = parsed.value("-f", "--file")
            if "f" in flags and target is None:
                rest = [a for a in args[1:] if not (a.text or "x").startswith("-")]
                target = rest[0] if rest else None
            an.write(target, "`tar` archive", cmd.cwds)
            return None
        an.unknown("extracting an archive (it may hold links or paths anywhere)")
        return None
    if prog in ("unzip", "7z", "unrar", "cpio", "bsdtar"):
        if any(a.text in ("-l", "l", "-t", "t", "-v", "-Z") for a in args):
            return None
        an.unknown("extracting an archive (it may hold links or paths anywhere)")
        return None
    if prog == "zip":
        operands = parse(args, "bnt", ()).operands
        an.write(operands[0] if operands else None, "`zip` archive", cmd.cwds)
        return None
    # gzip, gunzip, bzip2, xz, zstd, lz4: replace each file unless writing to stdout or listing.
    texts = {a.text for a in args}
    if texts & {"-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test"}:
        return None
    operands = parse(args, "S", ("--suffix",)).operands
    for w in operands:
        an.write(w, f"`{prog}` replaces the file", cmd.cwds)
        an.write(Word(None if w.text is None else w.text + "*", True, w.source), f"`{prog}` output", cmd.cwds)
    return None


def patch_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    texts = {a.text for a in args}
    if texts & {"--dry-run", "-C", "--check"} and prog == "patch":
        return None
    parsed = parse(args, "oipdBDFrVYzg", ("--output", "--input", "--strip", "--directory", "--reject-file"))
    out = parsed.value("-o", "--output")
    if out is not None:
        an.write(out, "`patch -o`", cmd.cwds)
    else:
        an.unknown("`patch` writes the files named in the patch")
    return None


def sqlite_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "", ("-cmd", "-separator", "-nullvalue", "-newline", "-init"))
    operands = parsed.operands
    readonly = any(n in ("-readonly", "--readonly", "-r") for n, _ in parsed.options) or parsed.has(
        "-readonly"
    )
    sql = " ".join(w.text or "$?" for w in operands[1:])
    if re.search(
        r"^\s*\.(shell|system|output|once|save|backup|import|open|excel|load)\b|\battach\b|\bvacuum\s+into\b",
        sql,
        re.I | re.M,
    ):
        an.unknown(f"`{prog}` with a command that writes files or runs programs")
    if not readonly or not operands:
        an.write(operands[0] if operands else None, f"`{prog}` (may change the database)", cmd.cwds)
    return None


def trainsleuth_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    """trainsleuth's own CLI: analysis commands run; a second server or protocol calls do not."""
    sub = args[0].text if args else None
    if sub in (None, "logs", "probe", "demo", "hook", "--help", "-h", "--version"):
        return None
    if sub == "client" and len(args) > 1 and args[1].text == "tools":
        return None
    if sub == "client" and len(args) > 2 and args[1].text == "call" and args[2].text in _ANALYSIS_TOOLS:
        return None
    an.unknown(f"`trainsleuth {sub}` changes configuration or talks to the protocol outside this session's "
               "MCP connection (use the MCP tools)")  # fmt: skip
    return None


_ANALYSIS_TOOLS = frozenset(
    [
        "get_investigation",
        "list_investigations",
        "probe_gradients",
        "read_probe_run",
        "compare_precision",
        "check_distributed",
        "dump_stacks",
        "analyze_training_log",
        "extract_metrics",
        "diff_checkpoints",
        "environment_report",
        "get_job",
        "search_literature",
        "lookup_constraints",
        "compare_runs",
        "check_resume",
    ]
)


def docker_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    sub = next((a.text for a in args if a.text and not a.text.startswith("-")), None)
    if sub in ("ps", "images", "logs", "inspect", "version", "info", "stats", "top", "port", "history"):
        return None
    an.unknown(f"`{prog} {sub}` can change files through mounted folders")
    return None


def make_reader_of(*subcommands: str | None) -> Rule:
    """Programs whose listed subcommands only read; any other is an unknown write."""
    allowed = set(subcommands)

    def rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
        sub = next((a.text for a in args if a.text is not None and not a.text.startswith("-")), None)
        if sub in allowed:
            return None
        an.unknown(f"the gate does not know whether `{prog} {sub or ''}`".rstrip() + " writes files")
        return None

    return rule


def jupyter_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    sub = args[0].text if args else None
    if (
        sub in ("notebook", "lab", "server", "kernelspec", "--version", "--paths", "troubleshoot")
        and sub != "nbconvert"
    ):
        return None
    if (prog == "jupyter-nbconvert" or sub == "nbconvert") and any(a.text == "--stdout" for a in args):
        return None
    an.unknown(f"`{prog} {sub or ''}` writes notebooks or their conversions".replace("  ", " "))
    return None


def mktemp_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(args, "pt", ("--tmpdir", "--suffix"))
    folder = parsed.value("-p", "--tmpdir")
    template = parsed.operands[0] if parsed.operands else None
    if folder is not None:
        an.write(
            Word(None if folder.text is None else folder.text.rstrip("/") + "/*", True, folder.source),
            "`mktemp`",
            cmd.cwds,
        )
    elif template is not None and template.text is not None and "/" in template.text and not parsed.has("-t"):
        an.write(Word(template.text.replace("X", "?"), True, template.source), "`mktemp`", cmd.cwds)
    elif template is not None and template.text is None:
        an.unknown("`mktemp` with a template only known when it runs")
    return None


def wget_rule(an: Analysis, cmd: Command, prog: str, args: list[Word]) -> Outcome | None:
    parsed = parse(
        args, "OoaPe", ("--output-document", "--output-file", "--append-output", "--directory-prefix")
    )
    doc = parsed.value("-O", "--output-document")
    for name in ("-o", "--output-file", "-a", "--append-output"):
        if parsed.has(name):
            an.write(parsed.value(name), f"`wget {name}`", cmd.cwds)
    if doc is not None:
        if doc.text != "-":
            an.write(doc, "`wget -O`", cmd.cwds)
        return None
    if parsed.has("--spider"):
        return None
    prefix = parsed.value("-P", "--directory-prefix")
    folder = prefix.text if prefix is not None and prefix.text is not None else "."
    an.write(Word(folder.rstrip("/") + "/*", True, folder), "`wget` downloads into the folder", cmd.cwds)
    return None
