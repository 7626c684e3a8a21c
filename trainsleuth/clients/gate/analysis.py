"""The walk over bash's syntax tree that collects what a command line writes.

`Analysis` visits pipelines, lists, subshells, compound commands, redirections and substitutions;
each simple command it meets goes to the command rule it was given (the rule book in rules.py),
and each variable assignment to the assignment rule (builtins.py). Passing those two in keeps
the walk below the rules that call back into it; `shell.analyse` wires them together.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from trainsleuth.clients.gate.model import (
    SAFE_DEVICES,
    Command,
    Cwds,
    Outcome,
    Word,
    Write,
)

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

# Limits that keep the work linear and bounded.
MAX_COMMAND_BYTES = 4 * 1024 * 1024  # a longer command line is not analysed: unknown write
MAX_DEPTH = 8  # nesting of re-parsed text (bash -c inside eval inside ...)
MAX_SCRIPT_BYTES = 256 * 1024  # a script read from disk (bash FILE, source FILE)
MAX_SCRIPTS = 16  # scripts read from disk per command line
MAX_NESTING = 60  # statements nested in one another (subshells, substitutions, compound commands)


_GLOB = re.compile(r"(?<!\\)[*?\[]")


@lru_cache(maxsize=1)
def _parser() -> Parser:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@dataclass
class Analysis:
    """Accumulates the writes of one command line (and everything nested in it)."""

    # What each simple command writes, and what an assignment risks (rules.py, builtins.py).
    command_rule: Callable[[Analysis, Command], Outcome]
    assignment_rule: Callable[[Analysis, str, Word, bool], None]
    base: str = ""  # the hook's folder, to read scripts named by relative paths
    writes: list[Write] = field(default_factory=list)
    steps: int = 0  # syntax nodes visited plus bytes parsed: the work done, for the linearity test
    scripts_read: int = 0
    nesting: int = 0  # statements being analysed inside one another (bounded: the walk recurses)

    # --------------------------------------------------------------------------- results

    def write(self, word: Word | None, why: str, cwds: Cwds) -> None:
        """Record a write of the file named by `word` (None: an unknown file) from each cwd."""
        if word is None or word.text is None:
            self.writes.append(Write(None, why))
            return
        text = word.text
        if text in SAFE_DEVICES or text.startswith("/dev/fd/") or text.startswith("/proc/self/fd/"):
            return
        if text.startswith("~"):
            text = os.path.expanduser(text)
        if os.path.isabs(text):
            self.writes.append(Write(os.path.normpath(text), why, word.glob))
            return
        for cwd in cwds:
            if cwd is None:
                self.writes.append(Write(None, why))
            else:
                self.writes.append(Write(os.path.normpath(os.path.join(cwd, text)), why, word.glob))

    def unknown(self, why: str) -> None:
        """A write the analysis cannot place (fails closed)."""
        self.writes.append(Write(None, why))

    # --------------------------------------------------------------------------- entry points

    def script(self, text: str, cwds: Cwds, depth: int) -> Outcome:
        """Analyse a piece of shell text (a command line, a `bash -c` payload, a script)."""
        if depth > MAX_DEPTH:
            self.unknown(f"shell text nested more than {MAX_DEPTH} levels deep")
            return Outcome.same(cwds)
        data = text.encode("utf-8", "surrogateescape")
        if len(data) > MAX_COMMAND_BYTES:
            self.unknown(f"a command longer than {MAX_COMMAND_BYTES} bytes is not analysed")
            return Outcome.same(cwds)
        self.steps += len(data)
        tree = _parser().parse(data)
        root = tree.root_node
        if root.has_error:
            self.unknown("the shell parser does not understand part of this command")
        return self._sequence(_named(root), cwds, depth)

    def script_file(self, word: Word | None, cwds: Cwds, depth: int, why: str) -> Outcome:
        """Analyse a script file run or sourced by the command line, when it can be read."""
        if word is None or word.text is None or word.glob:
            self.unknown(f"{why}: a script whose name is not known before it runs")
            return Outcome.same(cwds)
        if self.scripts_read >= MAX_SCRIPTS:
            self.unknown(f"{why}: more than {MAX_SCRIPTS} scripts")
            return Outcome.same(cwds)
        outcome_cwds: set[str | None] = set()
        for cwd in cwds:
            path = os.path.expanduser(word.text)
            if cwd is None and not os.path.isabs(path):
                self.unknown(f"{why} {word.text}: the script's folder is not known")
                continue
            full = path if os.path.isabs(path) else os.path.join(self.base, cwd or "", path)
            try:
                with open(full, "rb") as fh:
                    data = fh.read(MAX_SCRIPT_BYTES + 1)
            except OSError:
                self.unknown(f"{why} {word.text}: the script cannot be read before it runs")
                continue
            if len(data) > MAX_SCRIPT_BYTES:
                self.unknown(f"{why} {word.text}: the script is larger than {MAX_SCRIPT_BYTES} bytes")
                continue
            self.scripts_read += 1
            result = self.script(data.decode("utf-8", "replace"), frozenset({cwd}), depth + 1)
            outcome_cwds |= result.either
        return Outcome.same(frozenset(outcome_cwds) or cwds)

    def command(self, cmd: Command) -> Outcome:
        """Analyse one simple command given as words (also used for wrapped commands)."""
        self.steps += len(cmd.words) + 1
        return self.command_rule(self, cmd)

    # --------------------------------------------------------------------------- the syntax tree

    def _sequence(self, nodes: Iterable[Node], cwds: Cwds, depth: int) -> Outcome:
        """Statements run one after another (`;`, newline, `&`): each starts where the last left."""
        outcome = Outcome.same(cwds)
        current = cwds
        for node in nodes:
            outcome = self._statement(node, current, depth)
            current = outcome.either
        return outcome

    def _statement(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        self.steps += 1
        if self.nesting >= MAX_NESTING:
            self.unknown(f"shell constructs nested more than {MAX_NESTING} levels deep")
            return Outcome.same(cwds | {None})
        self.nesting += 1
        try:
            return self._statement_inner(node, cwds, depth)
        finally:
            self.nesting -= 1

    def _statement_inner(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        kind = node.type
        if kind in ("comment", "heredoc_body", "heredoc_end", "heredoc_start"):
            return Outcome.same(cwds)
        if kind == "command":
            return self._simple(node, [], cwds, depth)
        if kind == "redirected_statement":
            return self._redirected(node, cwds, depth)
        if kind == "list":
            return self._list(node, cwds, depth)
        if kind == "pipeline":
            # Each element runs in its own subshell: a `cd` there changes nothing after it.
            for child in _named(node):
                self._statement(child, cwds, depth)
            return Outcome.same(cwds)
        if kind == "subshell":
            self._sequence(_named(node), cwds, depth)
            return Outcome.same(cwds)
        if kind in ("compound_statement", "do_group", "program"):
            return self._sequence(_named(node), cwds, depth)
        if kind == "negated_command":
            inner = self._sequence(_named(node), cwds, depth)
            return Outcome(inner.fail, inner.ok)
        if kind == "variable_assignment":
            return self._assignment(node, cwds, depth, persistent=True)
        if kind == "variable_assignments":
            for child in _named(node):
                self._assignment(child, cwds, depth, persistent=True)
            return Outcome.same(cwds)
        if kind == "declaration_command":
            return self._declaration(node, cwds, depth)
        if kind == "unset_command":
            self._substitutions(node, cwds, depth)
            return Outcome.same(cwds)
        if kind == "function_definition":
            # The body may run later from anywhere: analyse it now, from an unknown folder too.
            body = node.child_by_field_name("body")
            if body is not None:
                self._statement(body, cwds | {None}, depth)
            return Outcome.same(cwds)
        if kind == "if_statement":
            return self._if(node, cwds, depth)
        if kind in ("while_statement", "until_statement", "for_statement", "c_style_for_statement"):
            return self._loop(node, cwds, depth)
        if kind == "case_statement":
            return self._case(node, cwds, depth)
        if kind in ("test_command", "arithmetic_expansion"):
            self._substitutions(node, cwds, depth)
            return Outcome.same(cwds)
        if kind in ("command_substitution", "process_substitution"):
            self._sequence(_named(node), cwds, depth)
            return Outcome.same(cwds)
        if kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self._redirect(node, cwds, depth)
            return Outcome.same(cwds)
        if kind == "ERROR":
            self.unknown("the shell parser does not understand part of this command")
            self._substitutions(node, cwds, depth)
            return Outcome.same(cwds | {None})
        # Anything else is a construct this analysis does not know: fail closed.
        self.unknown(f"shell construct `{kind}` is not analysed")
        self._substitutions(node, cwds, depth)
        return Outcome.same(cwds | {None})

    def _list(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        """`A && B` runs B only where A succeeded; `A || B` only where A failed."""
        children = list(node.children)
        named = [c for c in children if c.is_named and c.type != "comment"]
        operators = [c.type for c in children if not c.is_named]
        if len(named) != 2 or not operators:
            return self._sequence(named, cwds, depth)
        left = self._statement(named[0], cwds, depth)
        if operators[0] == "&&":
            right = self._statement(named[1], left.ok, depth)
            return Outcome(right.ok, left.fail | right.fail)
        if operators[0] == "||":
            right = self._statement(named[1], left.fail, depth)
            return Outcome(left.ok | right.ok, right.fail)
        right = self._statement(named[1], left.either, depth)
        return right

    def _if(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        conditions = [c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "condition"]
        cond = self._sequence([c for c in conditions if c.is_named], cwds, depth)
        ends: set[str | None] = set()
        branch_cwds = cond.ok
        rest = []
        for child in node.children:
            if not child.is_named or child in conditions:
                continue
            if child.type in ("elif_clause", "else_clause"):
                rest.append(child)
                continue
            self._statement(child, branch_cwds, depth)
            ends |= branch_cwds
        for clause in rest:
            inner = self._sequence(_named(clause), cond.fail, depth)
            ends |= inner.either
        if not any(c.type == "else_clause" for c in rest):
            ends |= cond.fail
        # Branch bodies ran in order above; a `cd` in a branch is folded in conservatively.
        return Outcome.same(frozenset(ends) | self._cd_effects(node, cwds))

    def _cd_effects(self, node: Node, cwds: Cwds) -> Cwds:
        """A compound statement containing `cd`/`pushd`/`popd` may leave any folder: unknown."""
        text = node.text or b""
        if re.search(rb"\b(cd|pushd|popd)\b", text):
            return cwds | {None}
        return cwds

    def _loop(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        for child in node.children:
            if not child.is_named:
                continue
            if child.type in ("variable_name", "word", "string", "raw_string", "concatenation", "number"):
                self._substitutions(child, cwds, depth)
                continue
            self._statement(child, cwds, depth)
        return Outcome.same(self._cd_effects(node, cwds))

    def _case(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        value = node.child_by_field_name("value")
        if value is not None:
            self._substitutions(value, cwds, depth)
        for item in _named(node):
            if item.type != "case_item":
                continue
            body = [
                c
                for i, c in enumerate(item.children)
                if c.is_named and item.field_name_for_child(i) != "value" and c.type != "comment"
            ]
            self._sequence(body, cwds, depth)
        return Outcome.same(self._cd_effects(node, cwds))

    def _redirected(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        body = node.child_by_field_name("body")
        redirects = [c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "redirect"]
        if body is not None and body.type == "command":
            return self._simple(body, redirects, cwds, depth)
        if body is None:
            for r in redirects:
                self._redirect(r, cwds, depth)
            return Outcome.same(cwds)
        outcome = self._statement(body, cwds, depth)
        # The parser hangs `a && b > f` as (a && b) > f: the redirection belongs to b, which runs
        # after a, so it may apply from any folder the statement passes through.
        where = cwds | outcome.either if body.type in ("list", "pipeline") else cwds
        for r in redirects:
            self._redirect(r, where, depth)
        return outcome

    def _redirect(self, node: Node, cwds: Cwds, depth: int) -> tuple[str | None, bool, Word | None] | None:
        """Record what a redirection writes; return (stdin text, dynamic?, stdin file) for input ones."""
        self.steps += 1
        kind = node.type
        if kind == "heredoc_redirect":
            text: str | None = None
            dynamic = False
            for child in node.children:
                if child.type in ("file_redirect", "herestring_redirect"):
                    self._redirect(child, cwds, depth)
                elif child.type == "heredoc_body":
                    dynamic = any(
                        c.type in ("simple_expansion", "expansion", "command_substitution")
                        for c in child.children
                    )
                    self._substitutions(child, cwds, depth)
                    text = (child.text or b"").decode("utf-8", "replace")
                elif child.is_named and child.type not in ("heredoc_start", "heredoc_end"):
                    # The parser hangs what follows `<<EOF` on the line (`| bash`, `&& rm x`) here.
                    self._statement(child, cwds, depth)
            return (text, dynamic, None)
        if kind == "herestring_redirect":
            words = [self.word(c, cwds, depth) for c in _named(node)]
            if words and all(w.static for w in words):
                return (" ".join(w.text or "" for w in words), False, None)
            return (None, True, None)
        if kind != "file_redirect":
            self._substitutions(node, cwds, depth)
            return None
        operator = "".join(c.type for c in node.children if not c.is_named)
        dest_node = node.child_by_field_name("destination")
        dest = self.word(dest_node, cwds, depth) if dest_node is not None else None
        if any(c.type == "ERROR" for c in node.children):
            self.unknown("a redirection the shell parser does not understand")
            return None
        if ">" not in operator:
            return (None, False, dest) if operator == "<" else None
        duplicates = (
            dest is not None and dest.text is not None and (dest.text.isdigit() or dest.text.endswith("-"))
        )
        if operator in (">&", "<&", ">&-") and duplicates:
            return None  # duplicates or closes a descriptor: no file
        if dest is None or dest.text is None:
            self.write(None, f"output redirection to {dest.source if dest else '?'}", cwds)
        else:
            self.write(dest, "output redirection", cwds)
        return None

    def _assignment(self, node: Node, cwds: Cwds, depth: int, *, persistent: bool) -> Outcome:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        value = self.word(value_node, cwds, depth) if value_node is not None else Word.literal("")
        name = (name_node.text or b"").decode() if name_node is not None else ""
        self.assignment_rule(self, name, value, persistent)
        return Outcome.same(cwds)

    def _declaration(self, node: Node, cwds: Cwds, depth: int) -> Outcome:
        for child in _named(node):
            if child.type == "variable_assignment":
                self._assignment(child, cwds, depth, persistent=True)
            else:
                self._substitutions(child, cwds, depth)
        return Outcome.same(cwds)

    def _simple(self, node: Node, redirects: list[Node], cwds: Cwds, depth: int) -> Outcome:
        """A simple command: prefix assignments, name, arguments, redirections."""
        words: list[Word] = []
        stdin: str | None = None
        stdin_dynamic = False
        stdin_file: Word | None = None
        all_redirects = list(redirects)
        for child in node.children:
            self.steps += 1
            if child.type == "variable_assignment":
                name_node = child.child_by_field_name("name")
                value_node = child.child_by_field_name("value")
                value = self.word(value_node, cwds, depth) if value_node is not None else Word.literal("")
                name = (name_node.text or b"").decode() if name_node is not None else ""
                self.assignment_rule(self, name, value, False)
            elif child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                all_redirects.append(child)
            elif child.type == "command_name":
                inner = list(_named(child))
                words.append(self.word(inner[0], cwds, depth) if inner else Word.dynamic(""))
            elif child.is_named and child.type != "comment":
                words.append(self.word(child, cwds, depth))
            elif not child.is_named and child.type == "$":
                words.append(Word.dynamic("$"))  # `$"..."`: a translated string
        for r in all_redirects:
            got = self._redirect(r, cwds, depth)
            if got is not None:
                text, dynamic, file_word = got
                if text is not None:
                    stdin = text
                stdin_dynamic = stdin_dynamic or dynamic
                if file_word is not None:
                    stdin_file = file_word
        if not words:
            return Outcome.same(cwds)
        return self.command(Command(words, cwds, depth, stdin, stdin_file, stdin_dynamic))

    # --------------------------------------------------------------------------- words

    def word(self, node: Node, cwds: Cwds, depth: int) -> Word:
        """The value of a word node; substitutions inside it are analysed as commands."""
        source = (node.text or b"").decode("utf-8", "replace")
        parts: list[str] = []
        glob = False
        dynamic = False
        for kind, piece, n in _word_parts(node):
            self.steps += 1
            if kind == "text":
                parts.append(piece)
            elif kind == "glob":
                parts.append(piece)
                glob = True
            elif kind == "subst":
                dynamic = True
                assert n is not None
                self._sequence(_named(n), cwds, depth)
            elif kind == "expansion":
                dynamic = True
                assert n is not None
                self._substitutions(n, cwds, depth)
            else:
                dynamic = True
        if dynamic:
            return Word(None, glob, source)
        return Word("".join(parts), glob, source)

    def _substitutions(self, node: Node, cwds: Cwds, depth: int) -> None:
        """Analyse every `$(...)`, backquote and `<(...)` inside a node that is not a command."""
        stack = [node]
        while stack:
            n = stack.pop()
            self.steps += 1
            if n.type in ("command_substitution", "process_substitution"):
                self._sequence(_named(n), cwds, depth)
                continue
            stack.extend(n.children)


def _named(node: Node) -> Iterator[Node]:
    for child in node.children:
        if child.is_named and child.type != "comment":
            yield child


_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
_WORD_ESCAPE = re.compile(r"\\(.)", re.S)


def _word_parts(node: Node) -> Iterator[tuple[str, str, Node | None]]:
    """Split a word node into ('text'|'glob'|'subst'|'expansion'|'dynamic', text, node) pieces."""
    kind = node.type
    raw = (node.text or b"").decode("utf-8", "replace")
    if kind in ("word", "number", "variable_name", "test_operator", "extglob_pattern"):
        if kind == "word" and _GLOB.search(raw):
            yield ("glob", _WORD_ESCAPE.sub(r"\1", raw), None)
        else:
            yield ("text", _WORD_ESCAPE.sub(r"\1", raw), None)
    elif kind == "raw_string":
        yield ("text", raw[1:-1], None)
    elif kind == "ansi_c_string":
        try:
            decoded = codecs.decode(raw[2:-1].encode("latin-1", "backslashreplace"), "unicode_escape")
        except (UnicodeDecodeError, ValueError):
            yield ("dynamic", raw, None)
            return
        yield ("text", decoded, None)
    elif kind in ("string", "translated_string"):
        for child in node.children:
            if child.type == "string_content":
                yield ("text", _DQ_ESCAPE.sub(r"\1", (child.text or b"").decode("utf-8", "replace")), None)
            elif child.type in ("command_substitution", "process_substitution"):
                yield ("subst", "", child)
            elif child.type in ("simple_expansion", "expansion", "arithmetic_expansion"):
                yield ("expansion", "", child)
            elif child.is_named:
                yield ("dynamic", "", None)
    elif kind == "concatenation":
        for child in node.children:
            if child.type == "word" and (child.text or b"") in (b"{", b"}"):
                yield ("glob", (child.text or b"").decode(), None)  # a brace expansion
            elif child.type == "brace_expression":
                yield ("glob", (child.text or b"").decode(), None)
            else:
                yield from _word_parts(child)
    elif kind == "brace_expression":
        yield ("glob", raw, None)
    elif kind in ("command_substitution", "process_substitution"):
        yield ("subst", "", node)
    elif kind in ("simple_expansion", "expansion", "arithmetic_expansion"):
        yield ("expansion", "", node)
    else:
        yield ("dynamic", raw, None)
